import type { AttributeValue, TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { ttlSeconds } from './ttl.js';

/**
 * The items of presence in the `connections` table, and the transaction parts that change
 * them. Every part carries the condition that makes it apply to the state its caller read,
 * so that a transaction built from a stale read is cancelled (and built again), never
 * applied.
 */

/**
 * How long (ms) a presence item outlives its last write: API Gateway closes every connection
 * after 2 h, so a live session is rewritten (dropped) before then. A safety net only.
 */
export const PRESENCE_ITEM_TTL_MS = 3 * 3600 * 1000;

/** A presence item's key. */
export type ItemKey = { pk: { S: string }; sk: { S: string } };

/** A member: `pk` = `p#<stream>`, `sk` = `m#<id>`. */
export function memberKey(stream: string, id: string): ItemKey {
  return { pk: { S: `p#${stream}` }, sk: { S: `m#${id}` } };
}

/** A connection's live session on a stream: `pk` = `c#<connection>`, `sk` = `p#<stream>`. */
export function recordKey(connectionId: string, stream: string): ItemKey {
  return { pk: { S: `c#${connectionId}` }, sk: { S: `p#${stream}` } };
}

/** A dropped session waiting for its time: `pk` = `d#<connection>`, `sk` = `p#<stream>`. */
export function departureKey(connectionId: string, stream: string): ItemKey {
  return { pk: { S: `d#${connectionId}` }, sk: { S: `p#${stream}` } };
}

/** A member as read: its sessions (connection → 0 live, else due ms), info and expiry (s). */
export interface StoredMember {
  readonly sessions: Readonly<Record<string, number>>;
  readonly infoJson: string | undefined;
  readonly expiresAt: number;
}

/** A member item, unmarshalled, as a {@link StoredMember}. */
export function toMember(item: Record<string, unknown>): StoredMember {
  const sessions: Record<string, number> = {};
  for (const [c, v] of Object.entries((item.sessions ?? {}) as Record<string, unknown>)) {
    sessions[c] = Number(v);
  }
  return {
    sessions,
    infoJson: typeof item.info === 'string' ? item.info : undefined,
    expiresAt: Number(item.expiresAt ?? 0),
  };
}

/** The `expiresAt` of an item written at `nowMs`, due at `atMs` (its write by default). */
function expiry(nowMs: number, atMs = nowMs): AttributeValue {
  return { N: String(ttlSeconds(Math.max(nowMs, atMs) + PRESENCE_ITEM_TTL_MS)) };
}

/** Creates a member with one live session, unless one exists (an expired one is replaced). */
export function createMember(
  table: string,
  stream: string,
  id: string,
  connectionId: string,
  infoJson: string | undefined,
  nowMs: number,
): TransactWriteItem {
  return {
    Put: {
      TableName: table,
      Item: {
        ...memberKey(stream, id),
        id: { S: id },
        sessions: { M: { [connectionId]: { N: '0' } } },
        ...(infoJson === undefined ? {} : { info: { S: infoJson } }),
        expiresAt: expiry(nowMs),
      },
      ConditionExpression: 'attribute_not_exists(pk) OR expiresAt < :now',
      ExpressionAttributeValues: { ':now': { N: String(Math.floor(nowMs / 1000)) } },
    },
  };
}

/**
 * Makes `connectionId` a live session of an existing member and sets its info: the map must
 * exist (an update never creates a member, {@link createMember} does).
 */
export function addSession(
  table: string,
  stream: string,
  id: string,
  connectionId: string,
  infoJson: string | undefined,
  nowMs: number,
): TransactWriteItem {
  const setInfo = infoJson === undefined ? ' REMOVE #i' : ', #i = :i';
  return {
    Update: {
      TableName: table,
      Key: memberKey(stream, id),
      UpdateExpression: `SET #s.#c = :zero, #e = :e${setInfo}`,
      ConditionExpression: 'attribute_exists(#s)',
      ExpressionAttributeNames: {
        '#s': 'sessions',
        '#c': connectionId,
        '#e': 'expiresAt',
        '#i': 'info',
      },
      ExpressionAttributeValues: {
        ':zero': { N: '0' },
        ':e': expiry(nowMs),
        ...(infoJson === undefined ? {} : { ':i': { S: infoJson } }),
      },
    },
  };
}

/**
 * Removes a session that holds `value` from a member of `size` sessions: the member itself
 * when it is the last (then `last`: emit `leave`), else its entry. Either is conditioned on
 * the session and the size read, so a session added or removed since cancels it.
 */
export function removeSession(
  table: string,
  stream: string,
  id: string,
  connectionId: string,
  member: StoredMember,
  nowMs: number,
): { item: TransactWriteItem; last: boolean } | undefined {
  const value = member.sessions[connectionId];
  if (value === undefined) return undefined;
  const size = Object.keys(member.sessions).length;
  const names = { '#s': 'sessions', '#c': connectionId };
  const values = { ':v': { N: String(value) }, ':one': { N: '1' } };
  if (size === 1) {
    return {
      last: true,
      item: {
        Delete: {
          TableName: table,
          Key: memberKey(stream, id),
          ConditionExpression: '#s.#c = :v AND size(#s) = :one',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        },
      },
    };
  }
  return {
    last: false,
    item: {
      Update: {
        TableName: table,
        Key: memberKey(stream, id),
        UpdateExpression: 'REMOVE #s.#c SET #e = :e',
        ConditionExpression: '#s.#c = :v AND size(#s) > :one',
        ExpressionAttributeNames: { ...names, '#e': 'expiresAt' },
        ExpressionAttributeValues: { ...values, ':e': expiry(nowMs) },
      },
    },
  };
}

/** Marks a live session (`value` read) dropped: due at `dueMs`. */
export function markDropped(
  table: string,
  stream: string,
  id: string,
  connectionId: string,
  value: number,
  dueMs: number,
  nowMs: number,
): TransactWriteItem {
  return {
    Update: {
      TableName: table,
      Key: memberKey(stream, id),
      UpdateExpression: 'SET #s.#c = :due, #e = :e',
      ConditionExpression: '#s.#c = :v',
      ExpressionAttributeNames: { '#s': 'sessions', '#c': connectionId, '#e': 'expiresAt' },
      ExpressionAttributeValues: {
        ':due': { N: String(dueMs) },
        ':v': { N: String(value) },
        ':e': expiry(nowMs, dueMs),
      },
    },
  };
}

/**
 * Writes the connection's record of its session on a stream, if the record is still as read
 * (`previous` id, or none).
 */
export function putRecord(
  table: string,
  connectionId: string,
  stream: string,
  id: string,
  previous: string | undefined,
  nowMs: number,
): TransactWriteItem {
  return {
    Put: {
      TableName: table,
      Item: {
        ...recordKey(connectionId, stream),
        stream: { S: stream },
        id: { S: id },
        expiresAt: expiry(nowMs),
      },
      ...recordIs(previous),
    },
  };
}

/** Checks that the connection's record on a stream still names `id`. */
export function recordStill(
  table: string,
  connectionId: string,
  stream: string,
  id: string,
): TransactWriteItem {
  return {
    ConditionCheck: { TableName: table, Key: recordKey(connectionId, stream), ...recordIs(id) },
  };
}

/** Deletes the connection's record on a stream, if it still names `id`. */
export function deleteRecord(
  table: string,
  connectionId: string,
  stream: string,
  id: string,
): TransactWriteItem {
  return { Delete: { TableName: table, Key: recordKey(connectionId, stream), ...recordIs(id) } };
}

function recordIs(id: string | undefined): {
  ConditionExpression: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, AttributeValue>;
} {
  if (id === undefined) return { ConditionExpression: 'attribute_not_exists(pk)' };
  return {
    ConditionExpression: '#id = :id',
    ExpressionAttributeNames: { '#id': 'id' },
    ExpressionAttributeValues: { ':id': { S: id } },
  };
}

/**
 * The departure of a dropped session, in the `byBucket` index under `bucket` = `d<n>` (apart
 * from the pinger's `b<n>`) and `since` = when it is due, so that expiry is a Query per bucket.
 */
export function putDeparture(
  table: string,
  connectionId: string,
  stream: string,
  id: string,
  dueMs: number,
  bucket: number,
  nowMs: number,
): TransactWriteItem {
  return {
    Put: {
      TableName: table,
      Item: {
        ...departureKey(connectionId, stream),
        connectionId: { S: connectionId },
        stream: { S: stream },
        id: { S: id },
        bucket: { S: `d${bucket}` },
        since: { N: String(dueMs) },
        expiresAt: expiry(nowMs, dueMs),
      },
    },
  };
}

/** Deletes a departure, if it is still the one due at `dueMs` (a later drop replaces it). */
export function deleteDeparture(
  table: string,
  connectionId: string,
  stream: string,
  dueMs: number,
): TransactWriteItem {
  return {
    Delete: {
      TableName: table,
      Key: departureKey(connectionId, stream),
      ConditionExpression: '#t = :due',
      ExpressionAttributeNames: { '#t': 'since' },
      ExpressionAttributeValues: { ':due': { N: String(dueMs) } },
    },
  };
}
