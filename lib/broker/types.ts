import type { Clock } from '../kernel/clock.js';

/** A message published to a stream. */
export interface StreamMessage {
  /** The stream name. */
  readonly stream: string;
  /** The payload, usually a JSON string. */
  readonly data: string;
  /** Position in the stream, set by the broker (first is 1). */
  readonly offset?: number;
  /** The stream's epoch, set by the broker. */
  readonly epoch?: string;
  /** Delivery hints. */
  readonly meta?: {
    /** Broadcast without being stored or numbered (whispers). */
    readonly transient?: boolean;
    /** A presence change (with `transient`): subscribers get `data` in a `presence` frame. */
    readonly presence?: boolean;
    /**
     * Broadcast again: the source delivered the last appended message a second time (its
     * consumer failed after the first fan-out began), so some subscribers may get it twice.
     * The fan-out counts those frames.
     */
    readonly redelivered?: boolean;
    /**
     * The message's position in its source, a decimal string (the outbox stream sequence
     * number the consumer got it with). A message at or below the last source position
     * appended to its stream is a redelivery: it is never stored twice, and the last one
     * is broadcast again with the offset it got the first time. One stream's messages must
     * come in source order (SQS FIFO delivers a message group in order).
     */
    readonly sourceOffset?: string;
  };
}

/** A command for every node: disconnect an identity, unsubscribe a stream. */
export interface RemoteCommandMessage {
  /** The command name, e.g. `disconnect`. */
  readonly command: string;
  /** The command's arguments. */
  readonly payload: unknown;
}

/** Delivers broker output to connected clients (API Gateway WebSockets in production). */
export interface Broadcaster {
  /** Delivers a stream message to the stream's subscribers. */
  broadcast(msg: StreamMessage): void | Promise<void>;
  /** Delivers a remote command. */
  broadcastCommand(cmd: RemoteCommandMessage): void | Promise<void>;
  /** Called when the first local subscriber of `stream` appears. */
  subscribe(stream: string): void | Promise<void>;
  /** Called when the last local subscriber of `stream` leaves. */
  unsubscribe(stream: string): void | Promise<void>;
}

/** Something that can be stored in the session cache. */
export interface Cacheable {
  /** The bytes to store. */
  toCacheEntry(): Uint8Array | Promise<Uint8Array>;
}

/**
 * Computes a session from the stored one (`null` when unknown or expired); `undefined`
 * leaves the stored session as it is.
 */
export type SessionUpdate = (
  current: Uint8Array | null,
) => Cacheable | undefined | Promise<Cacheable | undefined>;

/** Broker limits, in seconds and messages. */
export interface BrokerConfig {
  /**
   * Seconds a stream message is kept for history.
   * @default 300
   */
  readonly historyTtl: number;
  /**
   * Messages kept per stream.
   * @default 100
   */
  readonly historyLimit: number;
  /**
   * Seconds a session is kept after its connection finished.
   * @default 300
   */
  readonly sessionsTtl: number;
}

/** The defaults of AnyCable: 300 s history, 100 messages, 300 s sessions. */
export function defaultBrokerConfig(): BrokerConfig {
  return { historyTtl: 300, historyLimit: 100, sessionsTtl: 300 };
}

/** Stream history, session cache and subscription tracking (AnyCable `broker.Broker`). */
export interface Broker {
  /** Starts background work, if any. */
  start(): Promise<void>;
  /** Stops background work. */
  shutdown(): Promise<void>;
  /** Describes the broker and its limits, for the startup log. */
  announce(): string;
  /** Numbers, stores and broadcasts a message; a transient one is only broadcast. */
  handleBroadcast(msg: StreamMessage): Promise<void>;
  /** Passes a remote command to the broadcaster. */
  handleCommand(cmd: RemoteCommandMessage): Promise<void>;
  /** Registers a local subscriber of `stream`; returns the stream name. */
  subscribe(stream: string): Promise<string>;
  /** Removes a local subscriber of `stream`; returns the stream name. */
  unsubscribe(stream: string): Promise<string>;
  /** Messages after `offset` under `epoch`, in order; throws `HistoryError` when it cannot serve them all. */
  historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]>;
  /** Retained messages with a timestamp `>=` `tsSeconds`, in order. */
  historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]>;
  /** Stores a session; keeps it alive. */
  commitSession(sid: string, session: Cacheable): Promise<void>;
  /** The stored session, or `null` if unknown or expired. */
  restoreSession(sid: string): Promise<Uint8Array | null>;
  /** Marks a session finished: it expires `sessionsTtl` seconds later. */
  finishSession(sid: string): Promise<void>;
  /**
   * Read-modify-write of a session, safe against concurrent writers (optional): `update`
   * gets the stored session and returns the new one; when another write landed after the
   * read, `update` runs again on the newer session. Keeps the session alive like
   * `commitSession`. Resolves to whether it wrote.
   */
  updateSession?(sid: string, update: SessionUpdate): Promise<boolean>;
  /**
   * When each of `streams` last had a message appended to its history (ms since the epoch),
   * for the streams that have one (optional): the pinger spares connections whose
   * subscribers got a broadcast within their ping interval. Transient broadcasts do not count.
   */
  lastBroadcastAt?(streams: readonly string[]): Promise<Map<string, number>>;
}

/**
 * The session cache, the part of a {@link Broker} the WebSocket side writes: connecting,
 * subscribing and disconnecting need it, not the history. Brokers that keep sessions are
 * built over one, so that the fan-out (which finishes the sessions of gone connections) and
 * the broker (which feeds the fan-out) need not know each other.
 */
export interface SessionCache {
  /** Stores a session; keeps it alive. */
  commitSession(sid: string, session: Cacheable): Promise<void>;
  /** The stored session, or `null` if unknown or expired. */
  restoreSession(sid: string): Promise<Uint8Array | null>;
  /** Marks a session finished: it expires `sessionsTtl` seconds later. */
  finishSession(sid: string): Promise<void>;
  /**
   * Read-modify-write of a session, safe against concurrent writers: `update` gets the
   * stored session and returns the new one; when another write landed after the read,
   * `update` runs again on the newer session. Keeps the session alive. Resolves to whether
   * it wrote.
   */
  updateSession(sid: string, update: SessionUpdate): Promise<boolean>;
}

/** Stream history as the WebSocket side reads it (replay on subscribe and on `history`). */
export interface HistoryReader {
  /** Messages after `offset` under `epoch`, in order; throws `HistoryError` when it cannot serve them all. */
  historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]>;
  /** Retained messages with a timestamp `>=` `tsSeconds`, in order. */
  historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]>;
  /** When each of `streams` last had a message appended (ms since the epoch), where known (optional). */
  lastBroadcastAt?(streams: readonly string[]): Promise<Map<string, number>>;
}

/** Options shared by the history-keeping brokers. */
export interface BrokerOptions {
  /** Receives numbered messages and commands. */
  readonly broadcaster: Broadcaster;
  /** @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** Drives every TTL decision. @default the system clock */
  readonly clock?: Clock;
  /**
   * Seconds a stream's meta item (epoch, last offset) outlives the stream's last append
   * (`LAMBDACABLE_STREAM_META_TTL`), never less than `historyTtl`. Past it the stream is
   * forgotten: its epoch is unknown, and the next append starts a new epoch at offset 1
   * (what AnyCable does with a stream it lost).
   * @default {@link DEFAULT_STREAM_META_TTL} (1 day)
   */
  readonly streamMetaTtl?: number;
}

/** Seconds a stream's meta item outlives its last append: a day. */
export const DEFAULT_STREAM_META_TTL = 86_400;
