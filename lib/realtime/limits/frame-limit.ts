import type { Clock } from '../../kernel/clock.js';
import { errorMessage, ProtocolError } from '../../kernel/errors.js';
import { clipForLog } from '../../kernel/limits.js';
import type { Logger } from '../../kernel/logger.js';
import type { ConnectionApi } from '../ports.js';
import {
  type ChannelCommand,
  disconnectFrame,
  presenceErrorFrame,
  replyFrame,
} from '../protocol.js';
import type { RateLimiter } from './ports.js';
import { RATE_LIMITED_COMMANDS, type RateLimitedCommand } from './rate-limit.js';

/** The `disconnect` reason of a connection that keeps flooding. */
export const TOO_MANY_REQUESTS = 'too_many_requests';

/** Frames the rate limit refused since the counts were last taken ({@link FrameLimit.takeCounts}). */
export interface FrameLimitCounts {
  /** Frames refused: subscribes and history rejected, whispers and messages dropped. */
  readonly rateLimitedFrames: number;
  /** Connections disconnected with `too_many_requests`. */
  readonly floodDisconnects: number;
}

/** What {@link FrameLimit} needs. */
export interface FrameLimitDeps {
  /** Absent: no limit, and no store call per frame. */
  readonly limiter: RateLimiter | undefined;
  readonly api: ConnectionApi;
  readonly logger: Logger;
  readonly clock: Clock;
}

/**
 * The per-connection rate limit of client frames: each `subscribe`, `history`, `whisper`,
 * `message`, `join` and `presence` takes a token from the connection's bucket. Over the limit,
 * a `subscribe` is answered `reject_subscription`, a `history` `reject_history`, a `join` or
 * `presence` a presence `error`, a `whisper` or `message` is dropped; the refusal that makes the refusals in a row exceed the burst disconnects the
 * connection (`disconnect too_many_requests`, no reconnect) and closes it.
 */
export class FrameLimit {
  private rateLimited = 0;
  private floods = 0;

  constructor(private readonly deps: FrameLimitDeps) {}

  /**
   * Takes a token for a frame of `command`; a refused frame is answered (or dropped) and
   * thrown as a {@link ProtocolError}, which the gateway logs once. A refused `subscribe` of
   * an identifier the connection holds (`held`, read only then) is dropped, not rejected: it
   * is the client's re-send of a subscribe that was confirmed, and a reject would make the
   * client drop a subscription the server keeps delivering to.
   */
  async admit(
    connectionId: string,
    command: ChannelCommand,
    identifier: string,
    endpoint: string | undefined,
    held: () => Promise<boolean> = async () => false,
  ): Promise<void> {
    const { limiter, api, logger, clock } = this.deps;
    if (!limiter || !isLimited(command)) return;
    const verdict = await limiter.take(connectionId, clock.now());
    if (verdict.allowed) return;
    this.rateLimited++;
    if (command === 'subscribe' && !verdict.flooding && (await held())) {
      throw new ProtocolError(
        `rate limit: repeated subscribe dropped, the subscription is held (${verdict.strikes} refused in a row)`,
        { connectionId, command, identifier },
      );
    }
    if (command === 'subscribe') {
      await api.post(connectionId, replyFrame('reject_subscription', identifier), endpoint);
    } else if (command === 'history') {
      await api.post(connectionId, replyFrame('reject_history', identifier), endpoint);
    } else if (command === 'join' || command === 'presence') {
      await api.post(connectionId, presenceErrorFrame(identifier, TOO_MANY_REQUESTS), endpoint);
    }
    if (verdict.flooding) {
      this.floods++;
      try {
        if (
          (await api.post(connectionId, disconnectFrame(TOO_MANY_REQUESTS, false), endpoint)) ===
          'sent'
        ) {
          await api.close(connectionId, endpoint);
        }
      } catch (error) {
        logger.error('too many requests: disconnect failed', {
          connectionId: clipForLog(connectionId),
          error: errorMessage(error),
        });
      }
      throw new ProtocolError(
        `too many requests: ${verdict.strikes} frames refused in a row, the connection is closed`,
        { connectionId, command, identifier },
      );
    }
    throw new ProtocolError(
      `rate limit: ${command} ${['subscribe', 'history', 'join', 'presence'].includes(command) ? 'rejected' : 'dropped'} (${verdict.strikes} refused in a row)`,
      { connectionId, command, identifier },
    );
  }

  /** The counts since the last call, then zero. */
  takeCounts(): FrameLimitCounts {
    const counts = { rateLimitedFrames: this.rateLimited, floodDisconnects: this.floods };
    this.rateLimited = 0;
    this.floods = 0;
    return counts;
  }
}

function isLimited(command: ChannelCommand): command is RateLimitedCommand {
  return (RATE_LIMITED_COMMANDS as readonly string[]).includes(command);
}
