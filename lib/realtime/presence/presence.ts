import { LimitExceededError, ProtocolError } from '../../kernel/errors.js';
import { utf8Bytes } from '../../kernel/limits.js';
import type { Refusal } from '../protocol.js';
import type { PresenceChange, PresenceMembers, PresenceStore } from './ports.js';

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
