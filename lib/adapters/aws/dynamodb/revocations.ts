import { createHash } from 'node:crypto';
import {
  type AttributeValue,
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { activeSessionExpiry, resolveBrokerConfig } from '../../../broker/history.js';
import { type BrokerConfig, defaultBrokerConfig } from '../../../broker/types.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { type AwsResourceError, ThrottledError } from '../../../kernel/errors.js';
import type {
  RevocationStore,
  RevocationTarget,
  RevocationTimes,
} from '../../../realtime/auth/ports.js';
import { revocationKey } from '../../../realtime/auth/revocations.js';
import { awsCall } from '../call.js';
import { ttlSeconds } from './ttl.js';

/** Keys per BatchGetItem, the DynamoDB maximum. */
const BATCH_GET_KEYS = 100;
/** The tries of a BatchGetItem's unprocessed keys, and the first back-off between them (ms). */
const BATCH_GET_ATTEMPTS = 8;
const BATCH_GET_BACKOFF_MS = 25;

/** Options of {@link DynamoRevocationStore}. */
export interface DynamoRevocationStoreOptions {
  readonly client: DynamoDBClient;
  /** The `sessions` table: revocations live beside the sessions they apply to. */
  readonly tableName: string;
  /** Only `sessionsTtl` is used. @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** @default the system clock */
  readonly clock?: Clock;
}

/**
 * Revocations in the `sessions` table: `pk` = `$revoked#<kind>#<sha256 of the name>` (no
 * sid has that form; a client sending it as a sid restores nothing: the item has no session
 * data), `revokedAt` (ms), and `expiresAt` set as far out as a session stored now may live,
 * so that a revocation outlives every session it applies to.
 */
export class DynamoRevocationStore implements RevocationStore {
  private readonly config: BrokerConfig;
  private readonly clock: Clock;

  constructor(private readonly options: DynamoRevocationStoreOptions) {
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.clock = options.clock ?? systemClock;
  }

  async revoke(target: RevocationTarget, atMs: number): Promise<void> {
    const pk = revocationItemKey(target);
    const expiresAt = ttlSeconds(activeSessionExpiry(this.clock.now(), this.config));
    try {
      await awsCall('UpdateItem', this.options.tableName, [pk], () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: { pk: { S: pk } },
            UpdateExpression: 'SET revokedAt = :at, expiresAt = :e',
            // A later revocation stays.
            ConditionExpression: 'attribute_not_exists(revokedAt) OR revokedAt <= :at',
            ExpressionAttributeValues: {
              ':at': { N: String(atMs) },
              ':e': { N: String(expiresAt) },
            },
          }),
        ),
      );
    } catch (error) {
      if ((error as AwsResourceError).cause instanceof ConditionalCheckFailedException) return;
      throw error;
    }
  }

  async revokedAt(targets: readonly RevocationTarget[]): Promise<RevocationTimes> {
    const out = new Map<string, number>();
    const byKey = new Map(targets.map((t) => [revocationItemKey(t), revocationKey(t)]));
    const keys = [...byKey.keys()];
    const table = this.options.tableName;
    for (let i = 0; i < keys.length; i += BATCH_GET_KEYS) {
      let request: Record<string, AttributeValue>[] = keys
        .slice(i, i + BATCH_GET_KEYS)
        .map((pk) => ({ pk: { S: pk } }));
      for (let attempt = 0; request.length > 0; attempt++) {
        if (attempt >= BATCH_GET_ATTEMPTS) {
          // Unread, a revocation could be missed: the restore fails rather than undo it.
          throw new ThrottledError(
            `revocations: ${request.length} keys unprocessed after ${attempt} tries`,
            { resource: table },
          );
        }
        const res = await awsCall('BatchGetItem', table, [String(request[0]?.pk?.S)], () =>
          this.options.client.send(
            new BatchGetItemCommand({
              RequestItems: {
                [table]: {
                  Keys: request,
                  ProjectionExpression: 'pk, revokedAt',
                  ConsistentRead: true,
                },
              },
            }),
          ),
        );
        for (const item of res.Responses?.[table] ?? []) {
          const key = byKey.get(String(item.pk?.S));
          const at = item.revokedAt?.N;
          if (key !== undefined && at !== undefined) out.set(key, Number(at));
        }
        request = res.UnprocessedKeys?.[table]?.Keys ?? [];
        if (request.length > 0) {
          await new Promise((r) => setTimeout(r, BATCH_GET_BACKOFF_MS * 2 ** attempt));
        }
      }
    }
    return out;
  }
}

/** The `pk` of a revocation: short whatever the name's length, never a sid. */
function revocationItemKey(target: RevocationTarget): string {
  const hash = createHash('sha256').update(target.name).digest('hex');
  return `$revoked#${target.kind}#${hash}`;
}
