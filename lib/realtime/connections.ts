import { type Clock, systemClock } from '../messaging/types.js';

/** A connected WebSocket client. */
export interface ConnectionRecord {
  readonly connectionId: string;
  /** Who the client is (the token's subject), or `''` when anonymous. */
  readonly identity: string;
  /** The session id sent in `welcome`; `''` for a refused connection (it has no session). */
  readonly sid: string;
  /** The negotiated subprotocol. */
  readonly protocol: string;
  /** Milliseconds since the epoch. */
  readonly connectedAt: number;
  /** The management API endpoint that reaches this connection. */
  readonly endpoint?: string;
  /**
   * Why a refused connection (`sid` `''`) was refused: the `reason` of its `disconnect`
   * frame. `token_expired` lets AnyCable clients refresh the token and reconnect.
   * @default 'unauthorized'
   */
  readonly refusal?: 'unauthorized' | 'token_expired';
  /**
   * Seconds between server pings the client asked for at connect (AnyCable's `pi` query
   * parameter); absent: the configured `pingInterval`.
   */
  readonly pingInterval?: number;
}

/** A connection's subscription to a stream through a channel identifier. */
export interface Subscription {
  readonly connectionId: string;
  readonly stream: string;
  /** The identifier exactly as the client sent it. */
  readonly identifier: string;
  /** Whether whispers are allowed on this subscription. */
  readonly whisper?: boolean;
  /** The connection's management API endpoint, saving a read per subscriber on fan-out. */
  readonly endpoint?: string;
}

/**
 * A connection or a subscription as the pinger reads it ({@link ConnectionStore.changesSince}),
 * with when it was stored or last changed (ms since the epoch).
 */
export type ConnectionChange =
  | {
      readonly kind: 'connection';
      readonly connection: ConnectionRecord;
      readonly changedAt: number;
    }
  | {
      readonly kind: 'subscription';
      readonly subscription: Subscription;
      readonly changedAt: number;
    };

/** Connections and their subscriptions, with a lookup from stream to subscribers. */
export interface ConnectionStore {
  /** Stores (or replaces) a connection. */
  putConnection(connection: ConnectionRecord): Promise<void>;
  /** The connection, or `undefined`. */
  getConnection(connectionId: string): Promise<ConnectionRecord | undefined>;
  /** The connections of an identity. */
  connectionsOf(identity: string): Promise<ConnectionRecord[]>;
  /**
   * Adds a subscription unless the same one (connection, stream, identifier) is stored:
   * returns whether this call added it, so that exactly one of concurrent adds wins.
   */
  addSubscription(subscription: Subscription): Promise<boolean>;
  /** Removes a subscription; unknown ones are ignored. */
  removeSubscription(connectionId: string, stream: string, identifier: string): Promise<void>;
  /** A connection's subscriptions. */
  subscriptionsOf(connectionId: string): Promise<Subscription[]>;
  /** A stream's subscribers, page by page (a Query, never a Scan). */
  subscribersOf(stream: string, pageSize?: number): AsyncIterable<Subscription[]>;
  /** Removes a connection and all its subscriptions; returns the removed subscriptions. */
  removeConnection(connectionId: string): Promise<Subscription[]>;
  /**
   * Connections and subscriptions stored or changed at `sinceMs` or later, page by page:
   * pages of at most `pageSize` (default 100), never empty, order unspecified, no Scan.
   * `0` reads everything, each item once. A connection counts as changed when one of its
   * subscriptions is removed, so that a reader of changes learns it (it then reads the
   * connection's subscriptions). Removed items are not reported.
   */
  changesSince(sinceMs: number, pageSize?: number): AsyncIterable<ConnectionChange[]>;
}

/** An in-memory {@link ConnectionStore}. */
export class MemoryConnectionStore implements ConnectionStore {
  private readonly connections = new Map<string, { record: ConnectionRecord; changedAt: number }>();
  private readonly subscriptions = new Map<
    string,
    Map<string, { subscription: Subscription; changedAt: number }>
  >();
  private readonly clock: Clock;

  /** `clock` dates the changes ({@link changesSince}). */
  constructor(options: { clock?: Clock } = {}) {
    this.clock = options.clock ?? systemClock;
  }

  async putConnection(connection: ConnectionRecord): Promise<void> {
    this.connections.set(connection.connectionId, {
      record: connection,
      changedAt: this.clock.now(),
    });
  }

  async getConnection(connectionId: string): Promise<ConnectionRecord | undefined> {
    return this.connections.get(connectionId)?.record;
  }

  async connectionsOf(identity: string): Promise<ConnectionRecord[]> {
    return [...this.connections.values()]
      .map((c) => c.record)
      .filter((c) => c.identity === identity);
  }

  async addSubscription(subscription: Subscription): Promise<boolean> {
    const subs = this.subscriptions.get(subscription.connectionId) ?? new Map();
    const key = `${subscription.stream}\u0000${subscription.identifier}`;
    if (subs.has(key)) return false;
    subs.set(key, { subscription, changedAt: this.clock.now() });
    this.subscriptions.set(subscription.connectionId, subs);
    return true;
  }

  async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<void> {
    const removed = this.subscriptions.get(connectionId)?.delete(`${stream}\u0000${identifier}`);
    const connection = this.connections.get(connectionId);
    if (removed && connection) connection.changedAt = this.clock.now();
  }

  async subscriptionsOf(connectionId: string): Promise<Subscription[]> {
    return [...(this.subscriptions.get(connectionId)?.values() ?? [])].map((s) => s.subscription);
  }

  async *subscribersOf(stream: string, pageSize = 100): AsyncIterable<Subscription[]> {
    const all = [...this.subscriptions.values()].flatMap((subs) =>
      [...subs.values()].map((s) => s.subscription).filter((s) => s.stream === stream),
    );
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
  }

  async *changesSince(sinceMs: number, pageSize = 100): AsyncIterable<ConnectionChange[]> {
    const all: ConnectionChange[] = [
      ...[...this.connections.values()].map(
        (c): ConnectionChange => ({
          kind: 'connection',
          connection: c.record,
          changedAt: c.changedAt,
        }),
      ),
      ...[...this.subscriptions.values()].flatMap((subs) =>
        [...subs.values()].map(
          (s): ConnectionChange => ({
            kind: 'subscription',
            subscription: s.subscription,
            changedAt: s.changedAt,
          }),
        ),
      ),
    ].filter((c) => c.changedAt >= sinceMs);
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
  }

  async removeConnection(connectionId: string): Promise<Subscription[]> {
    const removed = await this.subscriptionsOf(connectionId);
    this.connections.delete(connectionId);
    this.subscriptions.delete(connectionId);
    return removed;
  }
}
