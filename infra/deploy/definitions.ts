/**
 * The one definition of every table and queue, in CloudFormation's shape. The local
 * bootstrap (`createLocalResources`) and `serverless.yml` both build from it, so local
 * and AWS cannot drift.
 */

import {
  BUCKET_INDEX,
  IDENTITY_INDEX,
  STREAM_INDEX,
} from '../../lib/adapters/aws/dynamodb/connections';
import type { TableName } from './names';

/** A key attribute. */
export interface AttributeDefinition {
  readonly AttributeName: string;
  readonly AttributeType: 'S' | 'N' | 'B';
}

/** A table definition (CloudFormation `AWS::DynamoDB::Table` properties, less the name). */
export interface TableDefinition {
  readonly AttributeDefinitions: readonly AttributeDefinition[];
  readonly KeySchema: readonly { AttributeName: string; KeyType: 'HASH' | 'RANGE' }[];
  readonly GlobalSecondaryIndexes?: readonly {
    IndexName: string;
    KeySchema: readonly { AttributeName: string; KeyType: 'HASH' | 'RANGE' }[];
    Projection: { ProjectionType: 'ALL' | 'KEYS_ONLY' };
  }[];
  readonly StreamSpecification?: { StreamViewType: 'NEW_IMAGE' };
  /** The TTL attribute (epoch seconds), if the table expires items. */
  readonly ttlAttribute?: string;
}

const S = (name: string): AttributeDefinition => ({ AttributeName: name, AttributeType: 'S' });
const N = (name: string): AttributeDefinition => ({ AttributeName: name, AttributeType: 'N' });
const key = (hash: string, range?: string) =>
  range
    ? [
        { AttributeName: hash, KeyType: 'HASH' as const },
        { AttributeName: range, KeyType: 'RANGE' as const },
      ]
    : [{ AttributeName: hash, KeyType: 'HASH' as const }];

/** Every table: keys, index, stream and TTL. */
export const tables: Readonly<Record<TableName, TableDefinition>> = {
  outbox: {
    AttributeDefinitions: [S('pk'), S('sk')],
    KeySchema: key('pk', 'sk'),
    StreamSpecification: { StreamViewType: 'NEW_IMAGE' },
    ttlAttribute: 'expiresAt',
  },
  history: {
    AttributeDefinitions: [S('pk'), N('sk')],
    KeySchema: key('pk', 'sk'),
    ttlAttribute: 'expiresAt',
  },
  sessions: {
    AttributeDefinitions: [S('pk')],
    KeySchema: key('pk'),
    ttlAttribute: 'expiresAt',
  },
  connections: {
    AttributeDefinitions: [
      S('pk'),
      S('sk'),
      S('fanKey'),
      S('fanSort'),
      S('identity'),
      S('bucket'),
      N('since'),
      S('connectionId'),
    ],
    KeySchema: key('pk', 'sk'),
    GlobalSecondaryIndexes: [
      // A stream's subscribers by shard (`<stream>#<shard>`) and hash: the fan-out's reads,
      // one slice per Query, each stream over as many partition keys as its spread.
      {
        IndexName: STREAM_INDEX,
        KeySchema: key('fanKey', 'fanSort'),
        Projection: { ProjectionType: 'ALL' },
      },
      {
        IndexName: IDENTITY_INDEX,
        KeySchema: key('identity', 'connectionId'),
        Projection: { ProjectionType: 'ALL' },
      },
      // Connections and subscriptions by when they were stored or changed (`since`, ms):
      // the pinger's reads. ALL: it needs every attribute but `expiresAt`.
      {
        IndexName: BUCKET_INDEX,
        KeySchema: key('bucket', 'since'),
        Projection: { ProjectionType: 'ALL' },
      },
    ],
    ttlAttribute: 'expiresAt',
  },
  acks: {
    AttributeDefinitions: [S('pk')],
    KeySchema: key('pk'),
    // Refreshed by every write (`LAMBDACABLE_ACK_TTL`): a partition idle that long is forgotten.
    ttlAttribute: 'expiresAt',
  },
  schemas: {
    AttributeDefinitions: [S('pk'), S('sk')],
    KeySchema: key('pk', 'sk'),
  },
  // The records of `POST /_broadcast`'s Idempotency-Key, in Powertools Idempotency's layout
  // (`id`, `expiration`): its documentation and tools apply as they are.
  idempotency: {
    AttributeDefinitions: [S('id')],
    KeySchema: key('id'),
    ttlAttribute: 'expiration',
  },
};

/** The default timeout of a function, in seconds (`provider.timeout` in serverless.yml). */
export const DEFAULT_FUNCTION_TIMEOUT = 30;

/** DLQ retention: the SQS maximum, 14 days, so a failure can be inspected. */
export const DLQ_RETENTION_SECONDS = 1_209_600;
