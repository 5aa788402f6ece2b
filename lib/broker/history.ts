import { randomBytes } from 'node:crypto';
import { ConfigError, HistoryError, MessageFormatError } from '../kernel/errors.js';
import type { BrokerConfig, StreamMessage } from './types.js';

/** A stream's epoch and the last offset handed out under it. */
export interface StreamMeta {
  readonly epoch: string;
  readonly lastOffset: number;
}

/** A message as stored in history. */
export interface StoredMessage {
  readonly offset: number;
  /** The source position it was appended from (`meta.sourceOffset`), if any. */
  readonly source?: string;
  readonly data: string;
  /** Milliseconds since the epoch. */
  readonly timestamp: number;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
}

/** A new random epoch. */
export function newEpoch(): string {
  return randomBytes(4).toString('hex');
}

/** The lowest offset still retained by the history limit. */
export function lowestRetainedOffset(meta: StreamMeta, config: BrokerConfig): number {
  return Math.max(1, meta.lastOffset - config.historyLimit + 1);
}

/** Whether `message` is still retained at `now` (TTL and limit). */
export function isRetained(
  message: StoredMessage,
  meta: StreamMeta,
  config: BrokerConfig,
  now: number,
): boolean {
  return message.expiresAt > now && message.offset >= lowestRetainedOffset(meta, config);
}

/**
 * Applies the recovery rule to the retained messages after `offset`: everything after
 * `offset` must still be there, or the client would silently miss messages.
 */
export function historyFromRetained(
  stream: string,
  meta: StreamMeta | undefined,
  epoch: string,
  offset: number,
  retainedAfter: readonly StoredMessage[],
): StreamMessage[] {
  if (!meta || meta.epoch !== epoch) {
    throw new HistoryError(`unknown epoch: ${epoch}, current: ${meta?.epoch ?? 'none'}`, {
      stream,
      epoch,
      offset,
    });
  }
  if (offset > meta.lastOffset) {
    throw new HistoryError(
      `offset ${offset} is ahead of stream ${stream}, last offset: ${meta.lastOffset}`,
      { stream, epoch, offset },
    );
  }
  if (offset === meta.lastOffset) return [];
  const first = retainedAfter[0];
  if (!first || first.offset !== offset + 1) {
    throw new HistoryError(
      `history of ${stream} after offset ${offset} is no longer retained, oldest: ${first?.offset ?? 'none'}`,
      { stream, epoch, offset },
    );
  }
  return retainedAfter.map((m) => toStreamMessage(stream, meta.epoch, m));
}

/** A stored message as a broker output. */
export function toStreamMessage(stream: string, epoch: string, m: StoredMessage): StreamMessage {
  return { stream, data: m.data, offset: m.offset, epoch };
}

/** The effective config: defaults plus overrides, validated. */
export function resolveBrokerConfig(
  defaults: BrokerConfig,
  overrides: Partial<BrokerConfig> | undefined,
): BrokerConfig {
  const config = { ...defaults, ...overrides };
  for (const [name, value] of Object.entries(config)) {
    if (!Number.isFinite(value) || value <= 0) {
      throw new ConfigError(`broker config ${name} must be a positive number, got: ${value}`, {
        variable: name,
      });
    }
  }
  return config;
}

/**
 * When (ms) the meta item of a stream appended to at `now` expires: `streamMetaTtl`
 * seconds later, and never before the message just appended.
 */
export function streamMetaExpiry(now: number, config: BrokerConfig, streamMetaTtl: number): number {
  return now + Math.max(streamMetaTtl, config.historyTtl) * 1000;
}

/** Tries of a session cache's `updateSession` before it gives up under contention. */
export const SESSION_UPDATE_ATTEMPTS = 25;

/** API Gateway's longest WebSocket connection, in seconds (2 h). */
const MAX_CONNECTION_SECONDS = 7200;

/** How long a session that was committed but never finished is kept: API Gateway's 2 h maximum plus the TTL. */
export function activeSessionExpiry(now: number, config: BrokerConfig): number {
  return now + (MAX_CONNECTION_SECONDS + config.sessionsTtl) * 1000;
}

/** Describes a broker for the startup log. */
export function describeBroker(kind: string, config: BrokerConfig): string {
  return `Using ${kind} broker (history limit: ${config.historyLimit}, history ttl: ${config.historyTtl}s, sessions ttl: ${config.sessionsTtl}s)`;
}

/**
 * Whether a message at source position `source` was appended already, given the last
 * appended `last`: `'last'` when it is that very message (broadcast it again with its
 * offset), `'older'` when it precedes it, `false` when it is new.
 */
export function redeliveryOf(source: string, last: string | undefined): 'last' | 'older' | false {
  if (!/^\d+$/.test(source)) {
    throw new MessageFormatError(`sourceOffset must be a decimal string, got: ${source}`);
  }
  if (last === undefined) return false;
  const s = BigInt(source);
  const l = BigInt(last);
  return s === l ? 'last' : s < l ? 'older' : false;
}
