import { randomUUID } from 'node:crypto';
import type { HistoryReader, SessionCache } from '../../broker/types.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { errorMessage, ProtocolError } from '../../kernel/errors.js';
import { clipForLog } from '../../kernel/limits.js';
import { type Logger, noopLogger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import type { GatewayConfig } from '../config.js';
import type { StreamDelivery } from '../fanout/fanout.js';
import { FrameLimit, type FrameLimitCounts } from '../limits/frame-limit.js';
import type { RateLimiter } from '../limits/ports.js';
import type { ConnectionApi, ConnectionRecord, ConnectionStore } from '../ports.js';
import {
  joinPresence,
  leavePresence,
  type PresenceCommandDeps,
  presenceInfo,
} from '../presence/commands.js';
import type { PresenceSettings } from '../presence/settings.js';
import {
  checkCommand,
  loggedIdentifier,
  PUBSUB_CHANNEL,
  parseClientFrame,
  presenceErrorFrame,
  type Refusal,
  replyFrame,
} from '../protocol.js';
import { ConnectionSessions } from '../session.js';
import {
  type ConnectDeps,
  type ConnectRequest,
  type ConnectResult,
  connect,
  disconnect,
} from './connect.js';
import { type QueuedFrame, receiveInOrder } from './frames.js';
import { serveHistory } from './history.js';
import {
  type SubscribeDeps,
  subscribe,
  subscriptionThrough,
  unsubscribe,
} from './subscriptions.js';
import { type WelcomeDeps, welcome } from './welcome.js';
import { whisper } from './whisper.js';

/** Options of {@link Gateway}. */
export interface GatewayOptions {
  readonly store: ConnectionStore;
  /** Where sessions live: written on connect and welcome, closed on disconnect. */
  readonly sessions: SessionCache;
  /** Remote `unsubscribe` and `disconnect` commands, which a restore checks. */
  readonly revocations: RevocationStore;
  /** Stream history, replayed on subscribe and on `history` (usually the broker). */
  readonly history: HistoryReader;
  /** Delivers whispers to the other subscribers of a stream: the fan-out. */
  readonly fanout: StreamDelivery;
  readonly api: ConnectionApi;
  readonly config: GatewayConfig;
  /** Per-connection token buckets of `subscribe`, `history`, `whisper`, `message`, `join` and `presence`. @default no limit */
  readonly rateLimiter?: RateLimiter;
  /**
   * Presence (`join`, `leave`, `presence`): the store, which writes the joins and leaves the
   * subscribers get, and the TTL of a dropped connection. @default off: presence commands are
   * answered with a presence `error`
   */
  readonly presence?: PresenceSettings;
  /** @default the system clock */
  readonly clock?: Clock;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
  /** @default `crypto.randomUUID` */
  readonly newSid?: () => string;
}

/**
 * The AnyCable-compatible WebSocket gateway, one method per Lambda invocation
 * (`$connect`, welcome, `$default`, `$disconnect`, pinger). It keeps no state in memory:
 * connections and subscriptions live in the {@link ConnectionStore}, sessions in the
 * {@link SessionCache}. Each job is a module of its own; this class parses and dispatches.
 */
export class Gateway {
  /** What the jobs use: each module takes the part it needs. */
  private readonly deps: ConnectDeps & WelcomeDeps & SubscribeDeps & PresenceCommandDeps;
  private readonly sessionCache: SessionCache;
  private readonly fanout: StreamDelivery;
  private readonly limit: FrameLimit;

  constructor(options: GatewayOptions) {
    const logger = options.logger ?? noopLogger;
    this.sessionCache = options.sessions;
    this.fanout = options.fanout;
    this.deps = {
      store: options.store,
      api: options.api,
      sessions: new ConnectionSessions(options.sessions, options.store, logger),
      revocations: options.revocations,
      history: options.history,
      config: options.config,
      clock: options.clock ?? systemClock,
      logger,
      newSid: options.newSid ?? randomUUID,
      presence: options.presence,
    };
    const { api, clock } = this.deps;
    this.limit = new FrameLimit({ limiter: options.rateLimiter, api, logger, clock });
  }

  /**
   * `$connect`: negotiates the subprotocol (400 when neither Action Cable protocol is
   * offered), identifies the client and stores the connection with a new session. Bad
   * credentials still answer 200: the connection is stored refused, and {@link welcome}
   * sends `disconnect unauthorized` and closes it. With the extended protocol and a
   * non-empty `sid`, the previous session's subscriptions are restored.
   */
  connect(request: ConnectRequest): Promise<ConnectResult> {
    return connect(this.deps, request);
  }

  /**
   * Delivers `welcome` (with `restored` and `restored_ids` after a restore), or for a
   * refused connection `disconnect unauthorized` followed by a close. Returns whether the
   * client has it: `false` when the connection is unknown or not reachable yet (call again).
   * A second call after a delivered welcome sends nothing. `known` saves the read of the
   * connection (the pinger has it).
   */
  welcome(connectionId: string, known?: ConnectionRecord): Promise<boolean> {
    return welcome(this.deps, connectionId, known);
  }

  /**
   * `$disconnect`: finishes the session (its TTL starts) and removes the connection and its
   * subscriptions (also what a gone connection gets).
   */
  disconnect(connectionId: string): Promise<void> {
    const { store, logger, presence, clock } = this.deps;
    const deps = { store, sessions: this.sessionCache, logger, presence, clock };
    return disconnect(deps, connectionId);
  }

  /** Frames the rate limit refused since the last call (the `rateLimitedFrames` metric), then zero. */
  takeCounts(): FrameLimitCounts {
    return this.limit.takeCounts();
  }

  /**
   * `$default`: handles one client frame. Every refused frame is logged as a
   * {@link ProtocolError} (answered with `reject_subscription` or `reject_history` where
   * the client waits for one); this method never throws.
   */
  async receive(connectionId: string, frame: string, endpoint?: string): Promise<void> {
    try {
      await this.handle(connectionId, frame, endpoint);
    } catch (error) {
      if (error instanceof ProtocolError) {
        // Client-controlled text (a command, an identifier, a value in the reason) is clipped.
        this.deps.logger.warn(`frame refused: ${clipForLog(error.message)}`, {
          connectionId: clipForLog(connectionId),
          command: clipForLog(error.command),
          identifier: clipForLog(loggedIdentifier(error.identifier)),
        });
      } else {
        this.deps.logger.error('frame failed', {
          connectionId,
          error: errorMessage(error),
        });
      }
    }
  }

  /**
   * A batch of the frames queue: each connection's frames through {@link receive} one after
   * another, in the order given; different connections' at the same time.
   */
  receiveInOrder(frames: readonly QueuedFrame[]): Promise<void> {
    return receiveInOrder(frames, (connectionId, body) => this.receive(connectionId, body));
  }

  private async handle(connectionId: string, raw: string, endpoint?: string): Promise<void> {
    const { store, api, history, logger } = this.deps;
    const parsed = parseClientFrame(raw, this.deps.config.maxFrameBytes);
    if (!parsed.ok) throw refused(parsed.refusal, { connectionId });
    const msg = parsed.frame;
    if (msg.command === 'pong') return;
    const frameCommand = msg.command;

    const found = await store.getConnection(connectionId);
    if (!found) {
      throw new ProtocolError('unknown connection', { connectionId, command: frameCommand });
    }
    if (!found.sid) {
      throw new ProtocolError('connection is unauthorized', {
        connectionId,
        command: frameCommand,
      });
    }
    const connection = endpoint && !found.endpoint ? { ...found, endpoint } : found;
    const target = endpoint ?? found.endpoint;

    const checked = checkCommand(msg, connection.protocol);
    if (!checked.ok) throw refused(checked.refusal, { connectionId, command: frameCommand });
    const { command, identifier } = checked;
    await this.limit.admit(
      connectionId,
      command,
      identifier,
      target,
      async () => (await subscriptionThrough(this.deps, connectionId, identifier)) !== undefined,
    );
    const post = (frame: string) => api.post(connectionId, frame, target);

    if (command === 'subscribe') {
      await subscribe(this.deps, connection, identifier, msg.history, post, target);
      if (msg.presence === undefined) return;
      // AnyCable's clients resubscribe with their presence: the join that goes with it.
      const joined = await subscriptionThrough(this.deps, connectionId, identifier);
      if (joined) await joinPresence(this.deps, joined, msg.presence, post);
      return;
    }
    const sub = await subscriptionThrough(this.deps, connectionId, identifier);
    if (!sub) {
      if (command === 'history') await post(replyFrame('reject_history', identifier));
      // Never unanswered: the client's `info()` waits for a reply.
      if (command === 'presence' || command === 'join') {
        await post(presenceErrorFrame(identifier, 'not_subscribed'));
      }
      throw new ProtocolError('unknown identifier: subscribe first', {
        connectionId,
        command,
        identifier,
      });
    }
    switch (command) {
      case 'unsubscribe':
        await unsubscribe(this.deps, connection, identifier, sub);
        await leavePresence(this.deps, sub, 'unsubscribe');
        return;
      case 'join':
        await joinPresence(this.deps, sub, msg.presence, post);
        return;
      case 'leave':
        await leavePresence(this.deps, sub, 'leave');
        return;
      case 'presence':
        await presenceInfo(this.deps, sub, post);
        return;
      case 'history':
        await serveHistory(history, connectionId, identifier, [sub], msg.history, post);
        return;
      case 'message':
        throw new ProtocolError(`channel ${PUBSUB_CHANNEL} has no actions`, {
          connectionId,
          command,
          identifier,
        });
      case 'whisper':
        await whisper(this.fanout, logger, connectionId, identifier, [sub], msg.data);
        return;
    }
  }
}

/** A typed refusal as the {@link ProtocolError} that {@link Gateway.receive} logs. */
function refused(
  refusal: Refusal<string>,
  fields: { connectionId: string; command?: string },
): ProtocolError {
  return new ProtocolError(refusal.message, {
    ...fields,
    ...(refusal.cause !== undefined ? { cause: refusal.cause } : {}),
  });
}
