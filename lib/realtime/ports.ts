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
  /**
   * When the client subscribed (ms since the epoch): a remote `unsubscribe` of the stream at
   * or after it revokes this subscription, also in a session restored later.
   */
  readonly subscribedAt?: number;
}

/**
 * What {@link ConnectionStore.addSubscription} did: `added`; `subscribed` when this very
 * subscription (stream and identifier) was stored already; `stream_taken` when another
 * identifier holds the stream on this connection; `limit` when the connection holds as many
 * subscriptions as allowed; `gone` when, with a limit, the connection is not stored.
 */
export type SubscriptionAdd = 'added' | 'subscribed' | 'stream_taken' | 'limit' | 'gone';

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

/**
 * A slice of one stream's subscribers: one shard of the stream, and within it the
 * subscribers whose hash starts with `prefix` (see `spread.ts`). A subscriber stays in the
 * same slice for as long as it is subscribed.
 */
export interface SubscriberSlice {
  readonly stream: string;
  /** The shard, from 0 to the stream's spread − 1. */
  readonly shard: number;
  /** Hex digits the subscribers' hash starts with; `''` for the whole shard. */
  readonly prefix: string;
}

/** What {@link ConnectionStore.readSlice} found. */
export interface SliceRead {
  /** Subscribers of the slice in hash order, at most as many as asked for. */
  readonly subscribers: Subscription[];
  /** Whether the slice holds more subscribers than were returned. */
  readonly truncated: boolean;
  /**
   * The stream's spread (number of shards) as read with shard 0's whole slice, where the
   * stream's spread item sorts first; 1 when the stream has none. Absent for other slices.
   */
  readonly spread?: number;
}

/**
 * What {@link ConnectionStore.listedInIndex} asks the stream index: which subscriptions to
 * `stream` made until `until` it still lists.
 */
export interface IndexProbe {
  readonly stream: string;
  /**
   * Ms since the epoch: only subscriptions with `subscribedAt` at or before it count (one
   * without `subscribedAt`, stored by an earlier version, always counts).
   */
  readonly until: number;
  /**
   * These connections' subscriptions to the stream, each read by its exact key; absent: any
   * subscriber of the stream, at most one per shard (enough to tell a shard is clear).
   */
  readonly connectionIds?: readonly string[];
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
   * Adds a subscription, atomically, unless the connection holds the stream already (one
   * subscription per stream per connection) or, with `limit`, holds `limit` subscriptions:
   * exactly one of concurrent adds wins. With `limit`, the connection must be stored (its
   * count of subscriptions is kept on it); without, the count is neither read nor kept.
   */
  addSubscription(subscription: Subscription, limit?: number): Promise<SubscriptionAdd>;
  /**
   * Removes the connection's subscription to `stream` if `identifier` holds it; others are
   * ignored. Resolves to whether this call removed it.
   */
  removeSubscription(connectionId: string, stream: string, identifier: string): Promise<boolean>;
  /** A connection's subscriptions (one Query). */
  subscriptionsOf(connectionId: string): Promise<Subscription[]>;
  /** The connection's subscription to `stream`, whatever its identifier (one read). */
  subscriptionOf(connectionId: string, stream: string): Promise<Subscription | undefined>;
  /** A stream's subscribers, page by page, shard after shard (Queries, never a Scan). */
  subscribersOf(stream: string, pageSize?: number): AsyncIterable<Subscription[]>;
  /**
   * Up to `limit` subscribers of one slice of a stream, in hash order (one Query, never a
   * Scan): what one fan-out task reads.
   */
  readSlice(slice: SubscriberSlice, limit: number): Promise<SliceRead>;
  /**
   * What the stream index (the one `subscribersOf` and `readSlice` read, as eventually
   * consistent as they are) still lists of the probed subscriptions ({@link IndexProbe}): a
   * remote `unsubscribe` asks it until nothing it removed is listed. Queries by key only.
   */
  listedInIndex(probe: IndexProbe): Promise<Subscription[]>;
  /**
   * Spreads the stream's new subscriptions over `spread` shards (a power of two), unless it
   * has as many already: a spread never shrinks. Resolves to the spread the stream has now.
   */
  spreadStream(stream: string, spread: number): Promise<number>;
  /** Removes a connection and all its subscriptions; returns the removed subscriptions. */
  removeConnection(connectionId: string): Promise<Subscription[]>;
  /**
   * Connections and subscriptions stored or changed at `sinceMs` or later, page by page:
   * pages of at most `pageSize` (default 100), never empty, order unspecified, no Scan.
   * `0` reads everything, each item once. A connection counts as changed when one of its
   * subscriptions is removed, so that a reader of changes learns it (it then reads the
   * connection's subscriptions). Removed items are not reported.
   *
   * A connection and its subscriptions are stored in bucket `bucketOf(id, B)`, B the
   * store's number of buckets when it wrote them (it only grows); `buckets` reads only those
   * bucket indexes (a pinger partition's). @default every bucket under the current B
   */
  changesSince(
    sinceMs: number,
    pageSize?: number,
    buckets?: readonly number[],
  ): AsyncIterable<ConnectionChange[]>;
}

export interface ConnectionApi {
  /** Posts a text frame; `'gone'` when the connection no longer exists (HTTP 410). */
  post(connectionId: string, frame: string, endpoint?: string): Promise<'sent' | 'gone'>;
  /** Closes a connection; closing an unknown one is not an error. */
  close(connectionId: string, endpoint?: string): Promise<void>;
}

/** Posts one frame to the client; `gone` when it is no longer connected. */
export type PostFrame = (frame: string) => Promise<'sent' | 'gone'>;
