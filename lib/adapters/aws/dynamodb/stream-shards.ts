import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  type QueryCommandInput,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { forEachConcurrently } from '../../../kernel/concurrency.js';
import { type AwsResourceError, ConfigError } from '../../../kernel/errors.js';
import { MAX_STREAM_BYTES, utf8Bytes } from '../../../kernel/limits.js';
import {
  isSpread,
  MAX_SPREAD,
  shardOf,
  subscriberSortKey,
} from '../../../realtime/fanout/spread.js';
import type {
  IndexProbe,
  SliceRead,
  SubscriberSlice,
  Subscription,
} from '../../../realtime/ports.js';
import { awsCall } from '../call.js';

/** Streams whose spread one instance remembers. */
const CACHE_STREAMS = 10_000;
/** The spread item's sort key within shard 0 of `byStreamShard`: before every hex hash. */
const SPREAD_SORT = '!';

/** The `byStreamShard` partition key of a stream's shard. */
export function fanKey(stream: string, shard: number): string {
  return `${stream}#${shard}`;
}

/** Pages of a Query hold at most this many items (`Limit`); more are read page by page. */
const MAX_QUERY_LIMIT = 1000;
/** Items per page of a stream-wide probe ({@link StreamShards.listed}). */
const PROBE_PAGE = 25;
/** Queries of one probe in flight at once. */
const PROBE_CONCURRENCY = 16;

/**
 * The shards a subscriber of a stream spread over `spread` shards may sit in: its shard
 * under each spread it may have been placed with (1, 2, 4, … `spread`), each once.
 */
export function candidateShards(connectionId: string, spread: number): number[] {
  const shards = new Set<number>();
  for (let n = 1; n <= spread; n *= 2) shards.add(shardOf(connectionId, n));
  return [...shards];
}

/** Options of {@link StreamShards}. */
export interface StreamShardsOptions extends SpreadDirectoryOptions {
  /** The index over (`fanKey`, `fanSort`). */
  readonly index: string;
}

/**
 * A stream's subscribers in `byStreamShard`, read by shard and slice (Queries, never a Scan),
 * and its spread ({@link SpreadDirectory}): the fan-out's side of the `connections` table.
 * `toSubscription` turns an unmarshalled subscription item into a {@link Subscription}.
 */
export class StreamShards {
  private readonly spreads: SpreadDirectory;

  constructor(
    private readonly options: StreamShardsOptions & {
      readonly toSubscription: (row: Record<string, unknown>) => Subscription;
    },
  ) {
    this.spreads = new SpreadDirectory(options);
  }

  /**
   * Writes a new subscription with `put`, given its keys in `byStreamShard` under the stream's
   * spread (cached). A throttled write means its shard is hot (the index partition throttles
   * the table's write, after the SDK's retries): the stream is spread twice as wide, and the
   * subscription written to its shard under the new spread.
   */
  async place<T>(
    stream: string,
    connectionId: string,
    put: (keys: { fanKey: string; fanSort: string }) => Promise<T>,
  ): Promise<T> {
    const spread = await this.spreads.spreadOf(stream);
    const keys = (n: number) => ({
      fanKey: fanKey(stream, shardOf(connectionId, n)),
      fanSort: subscriberSortKey(connectionId),
    });
    try {
      return await put(keys(spread));
    } catch (error) {
      if (!isThrottle(error) || spread * 2 > MAX_SPREAD) throw error;
      return put(keys(await this.spreads.raise(stream, spread * 2)));
    }
  }

  async spreadStream(stream: string, spread: number): Promise<number> {
    if (!isSpread(spread)) {
      throw new ConfigError(
        `a stream's spread is a power of two from 1 to ${MAX_SPREAD}, got: ${spread}`,
        { variable: 'spread' },
      );
    }
    return this.spreads.raise(stream, spread);
  }

  async *subscribersOf(stream: string, pageSize: number): AsyncIterable<Subscription[]> {
    if (utf8Bytes(stream) > MAX_STREAM_BYTES) return;
    let spread = 1;
    for (let shard = 0; shard < spread; shard++) {
      for await (const items of this.query(stream, fanKey(stream, shard), '', pageSize)) {
        const subs: Subscription[] = [];
        for (const item of items) {
          if (isSpreadItem(item)) spread = spreadOfItem(item);
          else subs.push(this.options.toSubscription(item));
        }
        if (subs.length > 0) yield subs;
      }
    }
  }

  async readSlice(slice: SubscriberSlice, limit: number): Promise<SliceRead> {
    const { stream, shard, prefix } = slice;
    const whole = shard === 0 && prefix === '';
    if (utf8Bytes(stream) > MAX_STREAM_BYTES) {
      return { subscribers: [], truncated: false, ...(whole ? { spread: 1 } : {}) };
    }
    let spread = 1;
    const subscribers: Subscription[] = [];
    let truncated = false;
    // One more than asked tells whether the slice holds more; shard 0's spread item sorts first.
    const wanted = Math.min(limit + 1 + (whole ? 1 : 0), MAX_QUERY_LIMIT);
    for await (const items of this.query(stream, fanKey(stream, shard), prefix, wanted)) {
      for (const item of items) {
        if (isSpreadItem(item)) spread = spreadOfItem(item);
        else if (subscribers.length < limit) subscribers.push(this.options.toSubscription(item));
        else truncated = true;
      }
      if (truncated) break;
    }
    return { subscribers, truncated, ...(whole ? { spread } : {}) };
  }

  /**
   * What the index still lists of the probed subscriptions, made until `probe.until`: for
   * given connections, one Query per shard each could be in (`fanKey` and `fanSort` exact: the
   * shard under every spread up to the stream's, 1 with one shard); for the whole stream, one
   * Query per shard (pages of {@link PROBE_PAGE}, read on past newer subscribers), stopping at
   * the shard's first match. The stream's spread is read first, strongly consistent (1 read
   * unit): the index's own spread item may lag too. An empty Query is 0.5 read unit.
   */
  async listed(probe: IndexProbe): Promise<Subscription[]> {
    const { stream, until, connectionIds } = probe;
    if (utf8Bytes(stream) > MAX_STREAM_BYTES) return [];
    const spread = await this.spreads.spreadNow(stream);
    const made = (s: Subscription) => (s.subscribedAt ?? Number.NEGATIVE_INFINITY) <= until;
    const out: Subscription[] = [];
    if (connectionIds) {
      const reads = connectionIds.flatMap((id) =>
        candidateShards(id, spread).map((shard) => ({ id, shard })),
      );
      await forEachConcurrently(reads, PROBE_CONCURRENCY, async ({ id, shard }) => {
        const key = fanKey(stream, shard);
        for await (const items of this.query(stream, key, subscriberSortKey(id), 10, true)) {
          for (const item of items) {
            const s = this.options.toSubscription(item);
            // Another connection may share the 32-bit hash.
            if (s.connectionId === id && made(s)) out.push(s);
          }
        }
      });
      return out;
    }
    const shards = Array.from({ length: spread }, (_, shard) => shard);
    await forEachConcurrently(shards, PROBE_CONCURRENCY, async (shard) => {
      for await (const items of this.query(stream, fanKey(stream, shard), '', PROBE_PAGE)) {
        const first = items
          .filter((item) => !isSpreadItem(item))
          .map((item) => this.options.toSubscription(item))
          .find(made);
        if (first) {
          out.push(first);
          return;
        }
      }
    });
    return out;
  }

  private async *query(
    stream: string,
    key: string,
    prefix: string,
    pageSize: number,
    exact = false,
  ): AsyncIterable<Record<string, unknown>[]> {
    const { client, tableName, index } = this.options;
    const sort = exact ? 'fanSort = :p' : 'begins_with(fanSort, :p)';
    const input: QueryCommandInput = {
      TableName: tableName,
      IndexName: index,
      KeyConditionExpression: prefix ? `fanKey = :k AND ${sort}` : 'fanKey = :k',
      ExpressionAttributeValues: { ':k': { S: key }, ...(prefix ? { ':p': { S: prefix } } : {}) },
      Limit: pageSize,
    };
    const iterator = paginateQuery({ client }, input)[Symbol.asyncIterator]();
    while (true) {
      const page = await awsCall('Query', tableName, [stream], () => iterator.next());
      if (page.done) return;
      yield (page.value.Items ?? []).map((item) => unmarshall(item));
    }
  }
}

/** Options of {@link SpreadDirectory}. */
export interface SpreadDirectoryOptions {
  readonly client: DynamoDBClient;
  /** The `connections` table. */
  readonly tableName: string;
  /** How long (ms) a spread read is used before it is read again. */
  readonly cacheMs: number;
  /** How long subscription items live: the spread item always outlives those written under it. */
  readonly itemTtlSeconds: number;
}

/**
 * Each stream's spread (its number of shards) in one item of the `connections` table:
 * `pk` = `st#<stream>`, `sk` = `spread`. The item is also in shard 0 of `byStreamShard`
 * (`fanKey` `<stream>#0`, `fanSort` `!`, first), so the fan-out learns the spread from the
 * Query it makes anyway. Writers read it (cached per instance) to place new subscriptions.
 */
export class SpreadDirectory {
  private readonly cache = new Map<string, { spread: number; readAt: number }>();

  constructor(private readonly options: SpreadDirectoryOptions) {}

  /** The stream's spread as this instance last read it, at most `cacheMs` ago. */
  async spreadOf(stream: string): Promise<number> {
    const now = Date.now();
    const known = this.cache.get(stream);
    if (known && now - known.readAt < this.options.cacheMs) return known.spread;
    const out = await awsCall('GetItem', this.options.tableName, [stream], () =>
      this.options.client.send(
        new GetItemCommand({ TableName: this.options.tableName, Key: spreadKey(stream) }),
      ),
    );
    const spread = out.Item ? spreadOfItem(out.Item) : 1;
    const expiresAt = Number(out.Item?.expiresAt?.N ?? 0);
    // Subscriptions stored from now on outlive the item: it must live longer still.
    if (out.Item && expiresAt < Math.floor(now / 1000) + this.options.itemTtlSeconds) {
      await this.raise(stream, spread);
    }
    this.remember(stream, spread, now);
    return spread;
  }

  /** Raises the stream's spread to `spread` unless it is as wide already; resolves to the spread now. */
  async raise(stream: string, spread: number): Promise<number> {
    const { tableName } = this.options;
    const now = Date.now();
    // Twice the item TTL: every subscription placed under this spread expires before it.
    const expiresAt = Math.floor(now / 1000) + 2 * this.options.itemTtlSeconds;
    try {
      await awsCall('UpdateItem', tableName, [stream], () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: tableName,
            Key: spreadKey(stream),
            UpdateExpression:
              'SET #spread = :spread, fanKey = :fanKey, fanSort = :fanSort, expiresAt = :expiresAt',
            ConditionExpression: 'attribute_not_exists(#spread) OR #spread <= :spread',
            ExpressionAttributeNames: { '#spread': 'spread' },
            ExpressionAttributeValues: {
              ':spread': { N: String(spread) },
              ':fanKey': { S: `${stream}#0` },
              ':fanSort': { S: SPREAD_SORT },
              ':expiresAt': { N: String(expiresAt) },
            },
          }),
        ),
      );
      this.remember(stream, spread, Date.now());
      return spread;
    } catch (error) {
      if (!((error as AwsResourceError).cause instanceof ConditionalCheckFailedException)) {
        throw error;
      }
      // Wider already (another writer raised it further): read what it is.
      this.cache.delete(stream);
      const wider = Math.max(spread, await this.spreadNow(stream));
      this.remember(stream, wider, Date.now());
      return wider;
    }
  }

  /** The stream's spread as stored now (a strongly consistent read: 1 read unit), remembered. */
  async spreadNow(stream: string): Promise<number> {
    const out = await awsCall('GetItem', this.options.tableName, [stream], () =>
      this.options.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: spreadKey(stream),
          ConsistentRead: true,
        }),
      ),
    );
    const spread = out.Item ? spreadOfItem(out.Item) : 1;
    this.remember(stream, spread, Date.now());
    return spread;
  }

  private remember(stream: string, spread: number, readAt: number): void {
    this.cache.delete(stream);
    this.cache.set(stream, { spread, readAt });
    if (this.cache.size > CACHE_STREAMS) this.cache.delete(this.cache.keys().next().value!);
  }
}

function spreadKey(stream: string): Record<string, AttributeValue> {
  return { pk: { S: `st#${stream}` }, sk: { S: 'spread' } };
}

/** Whether an item of `byStreamShard` is a stream's spread item, not a subscription. */
export function isSpreadItem(item: Record<string, unknown>): boolean {
  const sort = item.fanSort;
  return sort === SPREAD_SORT || (sort as AttributeValue | undefined)?.S === SPREAD_SORT;
}

/** The spread an item (marshalled or not) holds; 1 when it holds none. */
export function spreadOfItem(item: Record<string, unknown>): number {
  const raw = item.spread as number | AttributeValue | undefined;
  const n = typeof raw === 'number' ? raw : Number((raw as { N?: string } | undefined)?.N);
  return Number.isSafeInteger(n) && n >= 1 ? n : 1;
}

/** Whether a failed call was throttled by DynamoDB (after the SDK's own retries). */
function isThrottle(error: unknown): boolean {
  const name = ((error as AwsResourceError).cause as { name?: string } | undefined)?.name;
  return (
    name === 'ThrottlingException' ||
    name === 'ProvisionedThroughputExceededException' ||
    name === 'RequestLimitExceeded'
  );
}
