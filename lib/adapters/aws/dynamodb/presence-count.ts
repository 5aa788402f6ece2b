import { createHash } from 'node:crypto';
import {
  type AttributeValue,
  type DynamoDBClient,
  QueryCommand,
  type QueryCommandInput,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { MAX_STREAM_BYTES, utf8Bytes } from '../../../kernel/limits.js';
import type {
  PresenceChange,
  PresenceMember,
  PresenceMembers,
} from '../../../realtime/presence/ports.js';
import { awsCall } from '../call.js';
import { queryPages } from './query.js';
import { ttlSeconds } from './ttl.js';

/**
 * A stream's presence as it is read: its first members, and how many there are. A stream
 * whose members fit in one read is counted by reading them; a larger one by its count shards,
 * so that `info` costs the same on a stream of 200 members as on one of 200,000.
 *
 * The count is kept in {@link COUNT_SHARDS} items per stream, `pk` = `p#<stream>`, `sk` =
 * `n#<shard>` (the shard of the member's id), `n` = its members: every transaction that
 * creates a member adds 1 to its shard, every one that deletes a member subtracts 1, so the
 * count changes with the members it counts or not at all. Shards spread the transactions of
 * joins on one stream over several items (two transactions on one item conflict, and the
 * loser tries again).
 */

/** Count items per stream. */
export const COUNT_SHARDS = 32;
/**
 * How long (ms) a count item outlives its last change. Members live a few hours without a
 * write at most (`PRESENCE_ITEM_TTL_MS`), but a shard of a busy stream may see no join
 * or leave for a while: a month, so that only a stream left alone that long loses its count.
 */
export const COUNT_ITEM_TTL_MS = 30 * 24 * 3600 * 1000;

/**
 * The count item of `stream` that counts `id`: the shard from the id's SHA-256, so that ids
 * alike (`user-1`, `user-2`, ...) still spread over every shard (a multiplicative string hash
 * such as the pinger's `bucketOf` put 1,000 sequential ids on 28 of 32).
 */
export function countKey(stream: string, id: string): { pk: { S: string }; sk: { S: string } } {
  return { pk: { S: `p#${stream}` }, sk: { S: `n#${countShardOf(id)}` } };
}

/** The shard, 0 to {@link COUNT_SHARDS} − 1, of a presence id. */
export function countShardOf(id: string): number {
  return createHash('sha256').update(id).digest().readUInt32BE(0) % COUNT_SHARDS;
}

/**
 * The count updates of `changes`: +1 per join, −1 per leave, summed per item (a transaction
 * takes one operation per item); none for a sum of 0.
 */
export function countUpdates(
  table: string,
  changes: readonly PresenceChange[],
  nowMs: number,
): TransactWriteItem[] {
  const deltas = new Map<string, { key: ReturnType<typeof countKey>; delta: number }>();
  for (const change of changes) {
    const key = countKey(change.stream, change.id);
    const at = `${key.pk.S}\n${key.sk.S}`;
    const entry = deltas.get(at) ?? { key, delta: 0 };
    entry.delta += change.type === 'join' ? 1 : -1;
    deltas.set(at, entry);
  }
  return [...deltas.values()]
    .filter((d) => d.delta !== 0)
    .map(({ key, delta }) => ({
      Update: {
        TableName: table,
        Key: key,
        UpdateExpression: 'ADD #n :d SET #e = :e',
        ExpressionAttributeNames: { '#n': 'n', '#e': 'expiresAt' },
        ExpressionAttributeValues: {
          ':d': { N: String(delta) },
          ':e': { N: String(ttlSeconds(nowMs + COUNT_ITEM_TTL_MS)) },
        },
      },
    }));
}

/**
 * The members of `stream` in id order, `limit` at most, strongly consistent: the member items
 * up to `limit` (one Query; another only for each page that held members past their
 * safety-net TTL, which the filter drops), and `total` from them when that read reached the
 * end, else from the count shards (one more Query of {@link COUNT_SHARDS} small items).
 */
export async function readMembers(
  client: DynamoDBClient,
  table: string,
  stream: string,
  nowMs: number,
  limit: number,
): Promise<PresenceMembers> {
  const records: PresenceMember[] = [];
  if (utf8Bytes(stream) > MAX_STREAM_BYTES) return { total: 0, records };
  // At least one item: the read has to tell an empty stream from a large one.
  const want = Math.max(1, limit);
  let start: Record<string, AttributeValue> | undefined;
  do {
    const out = await query(client, table, stream, {
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :m)',
      FilterExpression: '#e >= :now',
      ProjectionExpression: '#id, #i, #e',
      ExpressionAttributeNames: { '#id': 'id', '#i': 'info', '#e': 'expiresAt' },
      ExpressionAttributeValues: {
        ':pk': { S: `p#${stream}` },
        ':m': { S: 'm#' },
        ':now': { N: String(Math.floor(nowMs / 1000)) },
      },
      Limit: want - records.length,
      ExclusiveStartKey: start,
      ConsistentRead: true,
    });
    for (const item of out.items) {
      const json = typeof item.info === 'string' ? item.info : undefined;
      records.push({
        id: String(item.id),
        info: json === undefined ? undefined : JSON.parse(json),
      });
    }
    start = out.next;
  } while (start && records.length < want);
  const shown = records.slice(0, Math.max(0, limit));
  if (!start) return { total: records.length, records: shown };
  return {
    total: Math.max(records.length, await countMembers(client, table, stream)),
    records: shown,
  };
}

/** The sum of the stream's count shards: one Query (its 32 items are one page). */
async function countMembers(client: DynamoDBClient, table: string, stream: string) {
  let total = 0;
  for await (const items of queryPages(client, table, stream, {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :n)',
    ProjectionExpression: '#n',
    ExpressionAttributeNames: { '#n': 'n' },
    ExpressionAttributeValues: { ':pk': { S: `p#${stream}` }, ':n': { S: 'n#' } },
    ConsistentRead: true,
  })) {
    for (const item of items) total += Number(item.n ?? 0);
  }
  return total;
}

/** One page of a Query, and where the next starts (none: the read reached the end). */
async function query(
  client: DynamoDBClient,
  table: string,
  stream: string,
  input: Omit<QueryCommandInput, 'TableName'>,
): Promise<{ items: Record<string, unknown>[]; next?: Record<string, AttributeValue> }> {
  const out = await awsCall('Query', table, [stream], () =>
    client.send(new QueryCommand({ TableName: table, ...input })),
  );
  return { items: (out.Items ?? []).map((item) => unmarshall(item)), next: out.LastEvaluatedKey };
}
