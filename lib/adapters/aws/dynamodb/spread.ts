import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { AwsResourceError } from '../../../kernel/errors.js';
import { awsCall } from '../call.js';

/** Streams whose spread one instance remembers. */
const CACHE_STREAMS = 10_000;
/** The spread item's sort key within shard 0 of `byStreamShard`: before every hex hash. */
const SPREAD_SORT = '!';

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
      const out = await awsCall('GetItem', tableName, [stream], () =>
        this.options.client.send(
          new GetItemCommand({
            TableName: tableName,
            Key: spreadKey(stream),
            ConsistentRead: true,
          }),
        ),
      );
      const wider = out.Item ? spreadOfItem(out.Item) : spread;
      this.remember(stream, wider, Date.now());
      return wider;
    }
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
