import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { RateLimit, RateLimiter, RateVerdict } from '../../../realtime/limits/ports.js';
import {
  bucketLifetimeMs,
  emissionInterval,
  latestAllowedTat,
  microseconds,
  takeAt,
  verdictOf,
} from '../../../realtime/limits/rate-limit.js';
import { awsCall } from '../call.js';
import { ttlSeconds } from './ttl.js';

/** The sort key of a connection's rate bucket, beside its connection item (`c`). */
export const RATE_BUCKET_SK = 'r';
/** A bucket outlives the time it takes to refill by this much (clock skew between Lambdas). */
const TTL_MARGIN_MS = 60_000;
/**
 * Conditional updates per take. Three always suffice: `tat` only grows, so a take that lost
 * a race goes from "full" to "filling" to "empty" at most once each (see {@link take}).
 */
const MAX_WRITES = 4;
const NAMES = { '#tat': 'tat', '#strikes': 'strikes', '#expiresAt': 'expiresAt' };

/** Options of {@link DynamoRateLimiter}. */
export interface DynamoRateLimiterOptions {
  readonly client: DynamoDBClient;
  /** The `connections` table: the bucket is the item `pk` = `c#<id>`, `sk` = `r`. */
  readonly tableName: string;
  readonly limit: RateLimit;
}

/** What a bucket item holds: theoretical arrival time (µs) and refusals in a row. */
interface BucketItem {
  readonly tat?: number;
  readonly strikes?: number;
}

/**
 * Token buckets in the `connections` table, one item per connection (`sk` `r`, beside the
 * connection item, which it never touches) with `tat` (GCRA's theoretical arrival time, µs),
 * `strikes` (refusals in a row) and `expiresAt` (TTL, s).
 *
 * A take reads the item (strongly consistent), then writes once: an allowed take is a
 * conditional `UpdateItem` that moves `tat` (`tat + interval` while the bucket is filling,
 * `now + interval` once it is full) on the condition that the case still holds, so concurrent
 * takes of a filling bucket never conflict and the condition admits no more than the bucket
 * holds; a refused take is an unconditional `ADD strikes 1`. Cost per frame: one read and one
 * write. A take that lost a race gets the item's new state with its failed write
 * (`ReturnValuesOnConditionCheckFailure`) and writes again, without reading: at most two
 * more writes, since `tat` only grows.
 *
 * The item needs no filter on `expiresAt`: by the time it expires its bucket is full again,
 * the same as no item, and its next take resets `strikes`.
 */
export class DynamoRateLimiter implements RateLimiter {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly limit: RateLimit;

  constructor(options: DynamoRateLimiterOptions) {
    this.client = options.client;
    this.table = options.tableName;
    this.limit = options.limit;
  }

  async take(connectionId: string, nowMs: number): Promise<RateVerdict> {
    let bucket = await this.read(connectionId);
    for (let write = 1; write <= MAX_WRITES; write++) {
      if (takeAt(bucket.tat, nowMs, this.limit) === undefined) break;
      const lost = await this.advance(connectionId, bucket.tat, nowMs, write);
      if (!lost) return verdictOf(0, this.limit);
      bucket = lost.item ?? (await this.read(connectionId));
    }
    return verdictOf(await this.strike(connectionId, nowMs), this.limit);
  }

  /**
   * Takes a token by moving `tat`, on the condition that the bucket is still as full as `tat`
   * says: full (no `tat`, or one in the past) or filling (`tat` from now to the latest
   * allowed). Returns the item as it was when the condition failed.
   */
  private async advance(
    connectionId: string,
    tat: number | undefined,
    nowMs: number,
    write: number,
  ): Promise<{ item: BucketItem | undefined } | undefined> {
    const interval = emissionInterval(this.limit);
    const now = microseconds(nowMs);
    const full = tat === undefined || tat < now;
    const values = full
      ? { ':now': now, ':next': now + interval }
      : { ':now': now, ':interval': interval, ':latest': latestAllowedTat(nowMs, this.limit) };
    try {
      await awsCall(`UpdateItem (write ${write})`, this.table, [connectionId], () =>
        this.client.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: this.key(connectionId),
            UpdateExpression: full
              ? 'SET #tat = :next, #strikes = :zero, #expiresAt = :expiresAt'
              : 'SET #tat = #tat + :interval, #strikes = :zero, #expiresAt = :expiresAt',
            ConditionExpression: full
              ? 'attribute_not_exists(#tat) OR #tat < :now'
              : '#tat BETWEEN :now AND :latest',
            ExpressionAttributeNames: NAMES,
            ExpressionAttributeValues: marshall({
              ...values,
              ':zero': 0,
              ':expiresAt': this.expiresAt(nowMs),
            }),
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      return undefined;
    } catch (error) {
      const cause = error instanceof Error ? error.cause : undefined;
      if (!(cause instanceof ConditionalCheckFailedException)) throw error;
      return { item: cause.Item ? (unmarshall(cause.Item) as BucketItem) : undefined };
    }
  }

  /** Counts a refusal: returns the refusals in a row, this one included. */
  private async strike(connectionId: string, nowMs: number): Promise<number> {
    const out = await awsCall('UpdateItem', this.table, [connectionId], () =>
      this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: this.key(connectionId),
          UpdateExpression: 'SET #expiresAt = :expiresAt ADD #strikes :one',
          ExpressionAttributeNames: {
            '#expiresAt': NAMES['#expiresAt'],
            '#strikes': NAMES['#strikes'],
          },
          ExpressionAttributeValues: marshall({ ':one': 1, ':expiresAt': this.expiresAt(nowMs) }),
          ReturnValues: 'UPDATED_NEW',
        }),
      ),
    );
    return Number(out.Attributes ? unmarshall(out.Attributes).strikes : 1);
  }

  private async read(connectionId: string): Promise<BucketItem> {
    const out = await awsCall('GetItem', this.table, [connectionId], () =>
      this.client.send(
        new GetItemCommand({
          TableName: this.table,
          Key: this.key(connectionId),
          ConsistentRead: true,
          ProjectionExpression: '#tat, #strikes',
          ExpressionAttributeNames: { '#tat': NAMES['#tat'], '#strikes': NAMES['#strikes'] },
        }),
      ),
    );
    return out.Item ? (unmarshall(out.Item) as BucketItem) : {};
  }

  private key(connectionId: string) {
    return marshall({ pk: `c#${connectionId}`, sk: RATE_BUCKET_SK });
  }

  /** TTL (s): the bucket is full again by then. */
  private expiresAt(nowMs: number): number {
    return ttlSeconds(nowMs + bucketLifetimeMs(this.limit) + TTL_MARGIN_MS);
  }
}
