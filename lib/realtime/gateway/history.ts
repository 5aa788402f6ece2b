import type { HistoryReader, StreamMessage } from '../../broker/types.js';
import { HistoryError, ProtocolError } from '../../kernel/errors.js';
import type { PostFrame, Subscription } from '../ports.js';
import { broadcastFrame, type Refusal, replyFrame } from '../protocol.js';

/** The `history` field of a `subscribe` or `history` frame, as sent. */
export interface HistoryRequest {
  since?: unknown;
  streams?: unknown;
}

/** What is wrong with a history request: `since`, or a stream position (its shape, epoch or offset). */
export type HistoryRefusalReason = 'since' | 'position' | 'epoch' | 'offset';

/**
 * Replays to a client what it missed on the streams of `subs` (one identifier's
 * subscriptions), as broadcast frames, then `confirm_history`. A stream given a position
 * (`epoch`, `offset`) is read from it, the others since `since` (seconds) when given. A
 * malformed request, or a position history cannot serve (unknown epoch, a gap), is answered
 * with `reject_history` and thrown as a {@link ProtocolError}; other read errors are thrown
 * after the `reject_history`.
 */
export async function serveHistory(
  history: HistoryReader,
  connectionId: string,
  identifier: string,
  subs: readonly Subscription[],
  requested: unknown,
  post: PostFrame,
): Promise<void> {
  const request = (
    typeof requested === 'object' && requested !== null ? requested : {}
  ) as HistoryRequest;
  const positions = (
    typeof request.streams === 'object' && request.streams !== null ? request.streams : {}
  ) as Record<string, unknown>;
  const streams = [...new Set(subs.map((s) => s.stream))];
  const invalid = invalidHistoryRequest(request, positions, streams);
  if (invalid) {
    await post(replyFrame('reject_history', identifier));
    throw new ProtocolError(`history rejected: ${invalid.message}`, {
      connectionId,
      command: 'history',
      identifier,
    });
  }
  const since = typeof request.since === 'number' ? request.since : undefined;
  const missed: StreamMessage[] = [];
  try {
    for (const stream of streams) {
      const at = positionOf(positions, stream) as { epoch?: unknown; offset?: unknown } | undefined;
      if (at && typeof at.epoch === 'string' && typeof at.offset === 'number') {
        missed.push(...(await history.historyFrom(stream, at.epoch, at.offset)));
      } else if (since !== undefined) {
        missed.push(...(await history.historySince(stream, since)));
      }
    }
  } catch (error) {
    await post(replyFrame('reject_history', identifier));
    if (error instanceof HistoryError) {
      throw new ProtocolError(`history rejected: ${error.message}`, {
        connectionId,
        command: 'history',
        identifier,
        cause: error,
      });
    }
    throw error;
  }
  for (const m of missed) {
    if ((await post(broadcastFrame(identifier, m))) === 'gone') return;
  }
  await post(replyFrame('confirm_history', identifier));
}

/**
 * Why a history request is malformed, or `undefined`: `since` must be a number of seconds
 * >= 0, and the position of a subscribed stream an object with a non-empty string `epoch`
 * and an integer `offset` >= 0 (a client error, answered with `reject_history`).
 */
export function invalidHistoryRequest(
  request: HistoryRequest,
  positions: Record<string, unknown>,
  streams: readonly string[],
): Refusal<HistoryRefusalReason> | undefined {
  const { since } = request;
  if (since !== undefined && (typeof since !== 'number' || !Number.isFinite(since) || since < 0)) {
    return {
      reason: 'since',
      message: `since must be a number of seconds >= 0, got: ${JSON.stringify(since)}`,
    };
  }
  for (const stream of streams) {
    const at = positionOf(positions, stream);
    if (at === undefined) continue;
    if (typeof at !== 'object' || at === null) {
      return { reason: 'position', message: 'a stream position must be an object' };
    }
    const { epoch, offset } = at as { epoch?: unknown; offset?: unknown };
    if (typeof epoch !== 'string' || epoch.length === 0) {
      return {
        reason: 'epoch',
        message: `epoch must be a non-empty string, got: ${JSON.stringify(epoch)}`,
      };
    }
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
      return {
        reason: 'offset',
        message: `offset must be an integer >= 0, got: ${JSON.stringify(offset)}`,
      };
    }
  }
  return undefined;
}

/**
 * The client's position of `stream`: an own property only, so a stream named `constructor`
 * or `__proto__` is not read from `Object.prototype`.
 */
function positionOf(positions: Record<string, unknown>, stream: string): unknown {
  return Object.hasOwn(positions, stream) ? positions[stream] : undefined;
}
