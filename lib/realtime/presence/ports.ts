/** A member of a stream's presence. */
export interface PresenceMember {
  readonly id: string;
  /** The `info` of the id's latest join (`undefined` when that join gave none). */
  readonly info: unknown;
}

/** A leave caused by a departure falling due ({@link PresenceStore.expire}). */
export interface PresenceLeave {
  readonly stream: string;
  readonly id: string;
}

/**
 * A change of a stream's presence: what subscribers get as a `presence` frame and services
 * consume as a `PresenceEvent`. A store hands its changes to its writer together with the
 * change itself (the DynamoDB store: in the same transaction, into the outbox), so they are
 * never lost to a crash between the two and keep the order of the changes.
 */
export interface PresenceChange {
  readonly stream: string;
  readonly type: 'join' | 'leave';
  readonly id: string;
  /** The member's `info` as JSON: a join's, absent when it gave none (and for a leave). */
  readonly info?: string;
}

/** What a join did: whether it made the id present, and the id a move left, if any. */
export interface PresenceJoin {
  /** The id was not present on the stream before: emit `join`. */
  readonly joined: boolean;
  /**
   * The connection was present on the stream with another id, and this join moved it: the
   * other id, when the connection was its last session (emit `leave` for it first).
   */
  readonly left?: string;
}

/** What a leave did: the id the connection left, and whether that was its last session. */
export interface PresenceLeft {
  /** The id the connection was present with; absent when it was not present. */
  readonly id?: string;
  /** That id, when this removed its last session: emit `leave`. */
  readonly left?: string;
}

/** A stream's members: how many, and some of them. */
export interface PresenceMembers {
  /** Exact: every member, however many `records` are returned. */
  readonly total: number;
  /** At most the `limit` asked for, in id order (UTF-8 bytes). */
  readonly records: readonly PresenceMember[];
}

/**
 * Stores who is present on which stream. Safe for any number of callers at once (each frame
 * of a connection may run in another Lambda): each method decides its event from the state
 * it changed atomically. `join` checks the id and info ({@link storedInfo}) and throws for
 * what {@link checkPresence} refuses.
 */
export interface PresenceStore {
  /**
   * Adds `connectionId` as a live session of `id` on `stream` and sets the member's `info`.
   * Idempotent per connection and stream (a repeat only updates `info`); a connection that
   * joins again with another id moves (and may cause a `left`).
   */
  join(
    stream: string,
    connectionId: string,
    id: string,
    info: unknown,
    nowMs: number,
  ): Promise<PresenceJoin>;
  /**
   * Removes the connection's live session on `stream` now (leave, unsubscribe). Resolves the
   * id the connection was present with (`id`, none for a connection not present) and, when
   * this removed that id's last session, the id no longer present (`left`).
   */
  leave(stream: string, connectionId: string, nowMs: number): Promise<PresenceLeft>;
  /**
   * The connection dropped: each of its sessions stays present until `nowMs + ttlMs`, then is
   * due ({@link expire}). Resolves the streams it was present on.
   */
  drop(connectionId: string, nowMs: number, ttlMs: number): Promise<string[]>;
  /**
   * Removes sessions whose drop is due at `nowMs`, of connections in `buckets`
   * (`bucketOf(connectionId, B)`, as a pinger partition reads; every bucket by default), at
   * most `limit` (default 100) per call: what is left waits for the next call (a pinger's
   * next tick), so a leave may come up to one tick after its due time.
   * A session joined again since its drop (a restore's new connection is a session of its
   * own) is kept. Resolves the leaves it caused. Overlapping calls are safe: each due
   * session is removed once.
   */
  expire(nowMs: number, buckets?: readonly number[], limit?: number): Promise<PresenceLeave[]>;
  /**
   * The members of `stream` (those with a session, live or dropped and not yet expired):
   * `total` exact, `records` capped at `limit` (default 100).
   */
  members(stream: string, nowMs: number, limit?: number): Promise<PresenceMembers>;
}
