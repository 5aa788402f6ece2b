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
   * Every stored connection (never subscriptions), page by page, each exactly once, pages of
   * at most `pageSize` (default 100) and never empty; order unspecified; no Scan.
   */
  allConnections(pageSize?: number): AsyncIterable<ConnectionRecord[]>;
}

/** An in-memory {@link ConnectionStore}. */
export class MemoryConnectionStore implements ConnectionStore {
  private readonly connections = new Map<string, ConnectionRecord>();
  private readonly subscriptions = new Map<string, Map<string, Subscription>>();

  async putConnection(connection: ConnectionRecord): Promise<void> {
    this.connections.set(connection.connectionId, connection);
  }

  async getConnection(connectionId: string): Promise<ConnectionRecord | undefined> {
    return this.connections.get(connectionId);
  }

  async connectionsOf(identity: string): Promise<ConnectionRecord[]> {
    return [...this.connections.values()].filter((c) => c.identity === identity);
  }

  async addSubscription(subscription: Subscription): Promise<boolean> {
    const subs = this.subscriptions.get(subscription.connectionId) ?? new Map();
    const key = `${subscription.stream}\u0000${subscription.identifier}`;
    if (subs.has(key)) return false;
    subs.set(key, subscription);
    this.subscriptions.set(subscription.connectionId, subs);
    return true;
  }

  async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<void> {
    this.subscriptions.get(connectionId)?.delete(`${stream}\u0000${identifier}`);
  }

  async subscriptionsOf(connectionId: string): Promise<Subscription[]> {
    return [...(this.subscriptions.get(connectionId)?.values() ?? [])];
  }

  async *subscribersOf(stream: string, pageSize = 100): AsyncIterable<Subscription[]> {
    const all = [...this.subscriptions.values()].flatMap((subs) =>
      [...subs.values()].filter((s) => s.stream === stream),
    );
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
  }

  async *allConnections(pageSize = 100): AsyncIterable<ConnectionRecord[]> {
    const all = [...this.connections.values()];
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
  }

  async removeConnection(connectionId: string): Promise<Subscription[]> {
    const removed = await this.subscriptionsOf(connectionId);
    this.connections.delete(connectionId);
    this.subscriptions.delete(connectionId);
    return removed;
  }
}
