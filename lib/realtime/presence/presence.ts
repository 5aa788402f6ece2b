import { LimitExceededError, ProtocolError } from '../../kernel/errors.js';
import { utf8Bytes } from '../../kernel/limits.js';
import type { Refusal } from '../protocol.js';

/**
 * Presence, the storage side (AnyCable's semantics): per stream, a member is a presence id
 * with an `info`; several connections (sessions) may be present with one id. `join` is an
 * event only for an id not yet present on the stream, `leave` only when its last session
 * leaves; a connection that drops without leaving stays present for a TTL, then leaves.
 *
 * Events are the store's answer, not the caller's guess: a store resolves `joined` when its
 * write made the id present and `left` when its write made it absent, so that on each stream
 * and id the events a store hands out alternate `join`, `leave`, `join`… whatever runs at
 * the same time (no ghost member, no lost or doubled event).
 */

/** Longest presence id, in UTF-8 bytes (part of a member's sort key). */
export const MAX_PRESENCE_ID_BYTES = 128;
/** Largest presence `info`, serialized as JSON, in UTF-8 bytes. */
export const MAX_PRESENCE_INFO_BYTES = 1024;
/** Seconds a dropped connection stays present (`LAMBDACABLE_PRESENCE_TTL`). @default 15 */
export const DEFAULT_PRESENCE_TTL_SECONDS = 15;

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

/** The change of a join that made `id` present (`infoJson`: its info as JSON, if any). */
export function joinChange(
  stream: string,
  id: string,
  infoJson: string | undefined,
): PresenceChange {
  return infoJson === undefined
    ? { stream, type: 'join', id }
    : { stream, type: 'join', id, info: infoJson };
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

/** Options of {@link presenceOf}. */
export interface PresenceReadOptions {
  /** The most `records` to return (`total` counts every member). @default 100 */
  readonly limit?: number;
  /** The time members are read at, ms. @default now */
  readonly nowMs?: number;
}

/**
 * A stream's presence, for services (an HTTP handler, a consumer): who is on the stream now,
 * as its subscribers' `info()` shows it. `total` is exact; `records` holds at most `limit`
 * members, in id order (UTF-8 bytes). With `DynamoPresenceStore` (`lambdacable/aws`) this is
 * strongly consistent: one Query on the stream's members, and one of its count items on a
 * stream of more than `limit` members.
 */
export function presenceOf(
  store: Pick<PresenceStore, 'members'>,
  stream: string,
  options: PresenceReadOptions = {},
): Promise<PresenceMembers> {
  return store.members(stream, options.nowMs ?? Date.now(), options.limit ?? 100);
}

/** Why a presence join is refused. */
export type PresenceRefusalReason = 'no_id' | 'id_too_long' | 'info_not_json' | 'info_too_large';

/** A refused presence: its `reason` code and the `message` that is logged. */
export type PresenceRefusal = Refusal<PresenceRefusalReason>;

/** A presence a client may join with (`info` as JSON, absent without info), or why not. */
export type PresenceCheck =
  | { readonly ok: true; readonly id: string; readonly infoJson: string | undefined }
  | { readonly ok: false; readonly refusal: PresenceRefusal };

/**
 * Checks a presence `{id, info}` against the limits: a non-empty string id of at most
 * {@link MAX_PRESENCE_ID_BYTES}, an info serializable as JSON in at most
 * {@link MAX_PRESENCE_INFO_BYTES}. Pure: the gateway answers a refusal, a store throws.
 */
export function checkPresence(id: unknown, info: unknown): PresenceCheck {
  if (typeof id !== 'string' || id === '') {
    return refuse('no_id', 'presence id must be a non-empty string');
  }
  const idBytes = utf8Bytes(id);
  if (idBytes > MAX_PRESENCE_ID_BYTES) {
    return refuse(
      'id_too_long',
      `presence id is ${idBytes} bytes, the limit is ${MAX_PRESENCE_ID_BYTES} (UTF-8)`,
    );
  }
  let infoJson: string | undefined;
  try {
    infoJson = info === undefined ? undefined : JSON.stringify(info);
  } catch (cause) {
    return {
      ok: false,
      refusal: { reason: 'info_not_json', message: 'presence info is not JSON', cause },
    };
  }
  if (info !== undefined && infoJson === undefined) {
    return refuse('info_not_json', 'presence info is not JSON');
  }
  const infoBytes = infoJson === undefined ? 0 : utf8Bytes(infoJson);
  if (infoBytes > MAX_PRESENCE_INFO_BYTES) {
    return refuse(
      'info_too_large',
      `presence info is ${infoBytes} bytes as JSON, the limit is ${MAX_PRESENCE_INFO_BYTES}`,
    );
  }
  return { ok: true, id, infoJson };
}

/**
 * What a store checks before it writes: the info's JSON (`undefined` without info), or it
 * throws {@link LimitExceededError} for an id or info over its limit and
 * {@link ProtocolError} for an empty id or an info that is not JSON.
 */
export function storedInfo(connectionId: string, id: string, info: unknown): string | undefined {
  const check = checkPresence(id, info);
  if (check.ok) return check.infoJson;
  const { reason, message } = check.refusal;
  if (reason === 'id_too_long') {
    throw new LimitExceededError(message, {
      what: 'presence id',
      bytes: utf8Bytes(id),
      limit: MAX_PRESENCE_ID_BYTES,
      kind: 'key',
    });
  }
  if (reason === 'info_too_large') {
    throw new LimitExceededError(message, {
      what: 'presence info',
      bytes: utf8Bytes(JSON.stringify(info)),
      limit: MAX_PRESENCE_INFO_BYTES,
      kind: 'payload',
    });
  }
  throw new ProtocolError(message, { connectionId, command: 'join' });
}

/** Compares ids as DynamoDB orders sort keys: by UTF-8 bytes. */
export function compareIds(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function refuse(
  reason: PresenceRefusalReason,
  message: string,
): { ok: false; refusal: PresenceRefusal } {
  return { ok: false, refusal: { reason, message } };
}
