import {
  BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type QueryCommandInput,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  checkKeyBytes,
  MAX_CONNECTION_ID_BYTES,
  MAX_IDENTITY_BYTES,
  utf8Bytes,
} from '../../../kernel/limits.js';
import { bucketOf, MIN_BUCKETS } from '../../../realtime/keepalive/partitions.js';
import type {
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  IndexProbe,
  SliceRead,
  SubscriberSlice,
  Subscription,
  SubscriptionAdd,
} from '../../../realtime/ports.js';
import { awsCall } from '../call.js';
import { toChange, toConnection, toSubscription } from './connection-items.js';
import { queryPages } from './query.js';
import { StreamShards } from './stream-shards.js';
import { SubscriptionWrites } from './subscription-writes.js';

/**
 * The GSI from a stream's shard to its subscribers: key (`fanKey` = `<stream>#<shard>`,
 * `fanSort` = the subscriber's hash in hex), so that one shard's slice is one Query.
 */
export const STREAM_INDEX = 'byStreamShard';
/** The GSI from identity to connections. */
export const IDENTITY_INDEX = 'byIdentity';
/**
 * The GSI over connection and subscription items by when they were stored or changed:
 * key (`bucket` `b<n>`, `since` ms), sharded into buckets (`bucketOf`), so that the pinger
 * reads what changed since its last read with a Query per bucket, and each pinger partition
 * its own buckets.
 */
export const BUCKET_INDEX = 'byBucket';
/** API Gateway closes every connection after 2 h; items outlive that by a margin, then expire. */
const ITEM_TTL_SECONDS = 3 * 3600;

/** Options of {@link DynamoConnectionStore}. */
export interface DynamoConnectionStoreOptions {
  readonly client: DynamoDBClient;
  /** The `connections` table. */
  readonly tableName: string;
  /**
   * How long (ms) a stream's spread, once read, is used for new subscriptions before it is read
   * again. A stale spread is safe (it is never larger than the stored one) but keeps putting
   * new subscriptions on fewer shards.
   * @default 10000
   */
  readonly spreadCacheMs?: number;
  /**
   * Gives B, the number of buckets items are written to (the pinger layout's, which never
   * shrinks: `cachedBuckets`). @default 8
   */
  readonly buckets?: () => Promise<number>;
}

/**
 * Connections in the `connections` table: `pk` = `c#<id>`, `sk` = `c` for the
 * connection (with `subs`, its count of subscriptions), `s#<stream>` for each subscription; the `byStream` index lists
 * a stream's subscribers (a paginated Query), `byIdentity` an identity's connections and
 * `byBucket` both kinds of item by their `since` (ms stored or changed).
 */
export class DynamoConnectionStore implements ConnectionStore {
  private readonly shards: StreamShards;
  private readonly buckets: () => Promise<number>;
  private readonly writes: SubscriptionWrites;

  constructor(private readonly options: DynamoConnectionStoreOptions) {
    this.shards = new StreamShards({
      client: options.client,
      tableName: options.tableName,
      index: STREAM_INDEX,
      toSubscription,
      cacheMs: options.spreadCacheMs ?? 10_000,
      itemTtlSeconds: ITEM_TTL_SECONDS,
    });
    this.buckets = options.buckets ?? (async () => MIN_BUCKETS);
    this.writes = new SubscriptionWrites(
      { client: options.client, tableName: options.tableName, itemTtlSeconds: ITEM_TTL_SECONDS },
      this.shards,
      this.buckets,
    );
  }

  /** Throws {@link LimitExceededError} for a connection id or identity over its limit. */
  async putConnection(c: ConnectionRecord): Promise<void> {
    checkKeyBytes('connection id', c.connectionId, MAX_CONNECTION_ID_BYTES);
    checkKeyBytes('identity', c.identity, MAX_IDENTITY_BYTES);
    const bucket = bucketOf(c.connectionId, await this.buckets());
    const item = marshall(
      {
        pk: `c#${c.connectionId}`,
        sk: 'c',
        connectionId: c.connectionId,
        bucket: `b${bucket}`,
        // Empty strings cannot be index keys: anonymous connections stay out of byIdentity.
        identity: c.identity || undefined,
        sid: c.sid,
        protocol: c.protocol,
        connectedAt: c.connectedAt,
        endpoint: c.endpoint,
        refusal: c.refusal,
        pingInterval: c.pingInterval,
        since: Date.now(),
        expiresAt: Math.floor(Date.now() / 1000) + ITEM_TTL_SECONDS,
      },
      { removeUndefinedValues: true },
    );
    await this.call('PutItem', c.connectionId, () =>
      this.options.client.send(
        new PutItemCommand({ TableName: this.options.tableName, Item: item }),
      ),
    );
  }

  async getConnection(connectionId: string): Promise<ConnectionRecord | undefined> {
    // A key DynamoDB would refuse was never stored.
    if (utf8Bytes(connectionId) > MAX_CONNECTION_ID_BYTES) return undefined;
    const out = await this.call('GetItem', connectionId, () =>
      this.options.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: { pk: { S: `c#${connectionId}` }, sk: { S: 'c' } },
          ConsistentRead: true,
        }),
      ),
    );
    return out.Item ? toConnection(unmarshall(out.Item)) : undefined;
  }

  async connectionsOf(identity: string): Promise<ConnectionRecord[]> {
    const out: ConnectionRecord[] = [];
    if (utf8Bytes(identity) > MAX_IDENTITY_BYTES) return out;
    for await (const items of this.query(identity, {
      IndexName: IDENTITY_INDEX,
      KeyConditionExpression: '#identity = :v',
      ExpressionAttributeNames: { '#identity': 'identity' },
      ExpressionAttributeValues: { ':v': { S: identity } },
    })) {
      out.push(...items.map(toConnection));
    }
    return out;
  }

  /**
   * Stores the subscription unless the connection holds its stream already, and with `limit`
   * unless it holds as many ({@link SubscriptionWrites.addSubscription}). Throws
   * {@link LimitExceededError} for a key part over its limit.
   */
  addSubscription(s: Subscription, limit?: number): Promise<SubscriptionAdd> {
    return this.writes.addSubscription(s, limit);
  }

  removeSubscription(connectionId: string, stream: string, identifier: string): Promise<boolean> {
    return this.writes.removeSubscription(connectionId, stream, identifier);
  }

  subscriptionOf(connectionId: string, stream: string): Promise<Subscription | undefined> {
    return this.writes.subscriptionOf(connectionId, stream);
  }

  async subscriptionsOf(connectionId: string): Promise<Subscription[]> {
    const out: Subscription[] = [];
    if (utf8Bytes(connectionId) > MAX_CONNECTION_ID_BYTES) return out;
    for await (const items of this.subscriptionItems(connectionId)) {
      out.push(...items.map(toSubscription));
    }
    return out;
  }

  private subscriptionItems(connectionId: string): AsyncIterable<Record<string, unknown>[]> {
    return this.query(connectionId, {
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :s)',
      ExpressionAttributeValues: { ':pk': { S: `c#${connectionId}` }, ':s': { S: 's#' } },
      ConsistentRead: true,
    });
  }

  subscribersOf(stream: string, pageSize = 100): AsyncIterable<Subscription[]> {
    return this.shards.subscribersOf(stream, pageSize);
  }

  readSlice(slice: SubscriberSlice, limit: number): Promise<SliceRead> {
    return this.shards.readSlice(slice, limit);
  }

  spreadStream(stream: string, spread: number): Promise<number> {
    return this.shards.spreadStream(stream, spread);
  }

  /** Queries of `byStreamShard` by key ({@link StreamShards.listed}), after a read of the spread. */
  listedInIndex(probe: IndexProbe): Promise<Subscription[]> {
    return this.shards.listed(probe);
  }

  async removeConnection(connectionId: string): Promise<Subscription[]> {
    const subs: Subscription[] = [];
    const keys = [{ pk: { S: `c#${connectionId}` }, sk: { S: 'c' } }];
    if (utf8Bytes(connectionId) <= MAX_CONNECTION_ID_BYTES) {
      // Each item by its own sort key: this version's and earlier versions' alike.
      for await (const items of this.subscriptionItems(connectionId)) {
        for (const item of items) {
          subs.push(toSubscription(item));
          keys.push({ pk: { S: `c#${connectionId}` }, sk: { S: String(item.sk) } });
        }
      }
    }
    for (let i = 0; i < keys.length; i += 25) {
      let requests: WriteRequest[] = keys
        .slice(i, i + 25)
        .map((Key) => ({ DeleteRequest: { Key } }));
      for (let attempt = 0; requests.length > 0 && attempt < 8; attempt++) {
        const out = await this.call('BatchWriteItem', connectionId, () =>
          this.options.client.send(
            new BatchWriteItemCommand({ RequestItems: { [this.options.tableName]: requests } }),
          ),
        );
        requests = (out.UnprocessedItems?.[this.options.tableName] ?? []).flatMap((r) =>
          r.DeleteRequest?.Key ? [{ DeleteRequest: { Key: r.DeleteRequest.Key } }] : [],
        );
        if (requests.length > 0) await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
      }
    }
    return subs;
  }

  /**
   * A Query per bucket of {@link BUCKET_INDEX} for `since >= sinceMs`, never a Scan: the
   * given buckets, or every one under the current B. The index is eventually consistent: a
   * write may show up a moment after it returned.
   */
  async *changesSince(
    sinceMs: number,
    pageSize = 100,
    buckets?: readonly number[],
  ): AsyncIterable<ConnectionChange[]> {
    const indexes = buckets ?? Array.from({ length: await this.buckets() }, (_, b) => b);
    // The buckets are read at once, pages yielded as they arrive: the pinger's first read
    // of every item takes one bucket's time, not one per bucket.
    const queries = indexes.map((b) =>
      this.query(`b${b}`, {
        IndexName: BUCKET_INDEX,
        KeyConditionExpression: '#bucket = :b AND #since >= :t',
        ExpressionAttributeNames: { '#bucket': 'bucket', '#since': 'since' },
        ExpressionAttributeValues: { ':b': { S: `b${b}` }, ':t': { N: String(sinceMs) } },
        Limit: pageSize,
      })[Symbol.asyncIterator](),
    );
    const next = (b: number) => {
      const step = queries[b]!.next().then((result) => ({ b, result }));
      step.catch(() => undefined); // raced below; a later rejection is not unhandled
      return step;
    };
    const pending = new Map(queries.map((_, b) => [b, next(b)]));
    while (pending.size > 0) {
      const { b, result } = await Promise.race(pending.values());
      if (result.done) {
        pending.delete(b);
        continue;
      }
      pending.set(b, next(b));
      if (result.value.length > 0) yield result.value.map(toChange);
    }
  }

  private query(
    id: string,
    input: Omit<QueryCommandInput, 'TableName'>,
  ): AsyncIterable<Record<string, unknown>[]> {
    return queryPages(this.options.client, this.options.tableName, id, input);
  }

  private call<T>(operation: string, id: string, fn: () => Promise<T>): Promise<T> {
    return awsCall(operation, this.options.tableName, [id], fn);
  }
}
