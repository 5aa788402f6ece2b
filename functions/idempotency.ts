/**
 * The composition root's part for `POST /_broadcast`'s `Idempotency-Key`, in a module of its
 * own: Powertools Idempotency (and its JMESPath) then reaches only the `httpBroadcast` bundle,
 * not every function that imports `runtime.ts`.
 */

import { IdempotencyConfig } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoRequestIdStore } from '../lib/aws';
import { runtime } from './runtime';
import { dynamodbClient } from './runtime/clients';

/** What `makeIdempotent` takes for `POST /_broadcast`'s `Idempotency-Key`. */
export interface Idempotency {
  readonly persistenceStore: DynamoDBPersistenceLayer;
  /** The key at `key`, the body's items at `items` (a repeat must match them). */
  readonly config: IdempotencyConfig;
}

let built: Idempotency | undefined;

/**
 * The records of `POST /_broadcast`'s `Idempotency-Key` (Powertools Idempotency) in the
 * `idempotency` table, kept `LAMBDACABLE_IDEMPOTENCY_TTL` seconds; built once per instance.
 * On a DynamoDB client of its own: Powertools adds a middleware to the client it gets, and
 * the shared client (`cacheMiddleware`) takes middleware only before its first call.
 */
export function idempotency(): Idempotency {
  if (built) return built;
  const { tables, config, record, settings } = runtime();
  const client = dynamodbClient(record, settings.endpoints.dynamodb);
  built = {
    persistenceStore: new DynamoDBPersistenceLayer({
      tableName: tables.idempotency,
      awsSdkV3Client: client,
    }),
    config: new IdempotencyConfig({
      eventKeyJmesPath: 'key',
      payloadValidationJmesPath: 'items',
      expiresAfterSeconds: config.idempotencyTtl,
      hashFunction: 'sha256',
    }),
  };
  return built;
}

let ids: DynamoRequestIdStore | undefined;

/**
 * The id base of each `Idempotency-Key`'s first attempt, beside its records in the
 * `idempotency` table and kept as long (`LAMBDACABLE_IDEMPOTENCY_TTL`) from that attempt,
 * also after a failure: a retry gives each message the id it had, and the outbox refuses what
 * is written already. Built once per instance, on the shared client (it adds no middleware).
 */
export function requestIds(): DynamoRequestIdStore {
  if (ids) return ids;
  const { dynamodb, tables, config } = runtime();
  ids = new DynamoRequestIdStore({
    client: dynamodb,
    tableName: tables.idempotency,
    ttlSeconds: config.idempotencyTtl,
  });
  return ids;
}
