import { createHash } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { newEventId } from '../../../events/event-id.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { AwsResourceError, IdempotencyKeyReusedError } from '../../../kernel/errors.js';
import type { RequestIdStore } from '../../../realtime/broadcasts/ports.js';
import { awsCall } from '../call.js';
import { ttlSeconds } from './ttl.js';

/** What an item's `id` starts with; Powertools Idempotency's records start `lambdacable.broadcast#`. */
const ID_PREFIX = 'lambdacable.broadcast.ids#';

/** Options of {@link DynamoRequestIdStore}. */
export interface DynamoRequestIdStoreOptions {
  readonly client: DynamoDBClient;
  /** The `idempotency` table (Powertools Idempotency's layout: `id`, TTL on `expiration`). */
  readonly tableName: string;
  /**
   * Seconds a scope's id base is kept from its first claim (`LAMBDACABLE_IDEMPOTENCY_TTL`):
   * at most the outbox's row retention, or a late retry no longer finds what was written.
   */
  readonly ttlSeconds: number;
  /** @default the system clock */
  readonly clock?: Clock;
}

/**
 * A {@link RequestIdStore} in the `idempotency` table, beside Powertools Idempotency's
 * records: `id` = `lambdacable.broadcast.ids#` and the SHA-256 of the scope, `base`,
 * `fingerprint`, and `expiration` (the table's TTL, seconds). A claim is one conditional
 * `PutItem`, which hands back the first attempt's item when there is one; an expired item
 * (TTL deletes late) counts as none.
 */
export class DynamoRequestIdStore implements RequestIdStore {
  private readonly clock: Clock;

  constructor(private readonly options: DynamoRequestIdStoreOptions) {
    this.clock = options.clock ?? systemClock;
  }

  async claim(scope: string, fingerprint: string): Promise<string> {
    const { client, tableName } = this.options;
    const id = ID_PREFIX + createHash('sha256').update(scope, 'utf8').digest('hex');
    const now = this.clock.now();
    const base = newEventId(now);
    try {
      await awsCall('PutItem', tableName, [id], () =>
        client.send(
          new PutItemCommand({
            TableName: tableName,
            Item: {
              id: { S: id },
              base: { S: base },
              fingerprint: { S: fingerprint },
              expiration: { N: String(ttlSeconds(now + this.options.ttlSeconds * 1000)) },
            },
            ConditionExpression: 'attribute_not_exists(id) OR expiration <= :now',
            ExpressionAttributeValues: { ':now': { N: String(Math.floor(now / 1000)) } },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      return base;
    } catch (error) {
      const cause = (error as AwsResourceError).cause;
      if (!(cause instanceof ConditionalCheckFailedException)) throw error;
      const first = cause.Item;
      if (!first?.base?.S) {
        throw new AwsResourceError(`${id} in ${tableName} has no id base`, {
          resource: tableName,
          ids: [id],
        });
      }
      if (first.fingerprint?.S !== fingerprint) throw new IdempotencyKeyReusedError({ scope });
      return first.base.S;
    }
  }
}
