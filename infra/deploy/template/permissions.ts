/**
 * What each function may do, resource by resource: the permission vocabulary and the list of
 * every built-in function's permissions. `roles.ts` turns them into IAM roles.
 */

import {
  BUCKET_INDEX,
  IDENTITY_INDEX,
  STREAM_INDEX,
} from '../../../lib/adapters/aws/dynamodb/connections';
import { FRAMES, type TableName } from '../names';
import type { SecretVariable } from '../secrets';
import type { Json } from './types';

/**
 * What each function may do, resource by resource. Actions are IAM actions: a
 * `TransactWriteItems` is authorised as the `PutItem`/`UpdateItem`/`ConditionCheckItem` of
 * each of its items, a `SendMessageBatch` as `SendMessage`. Each list is what the
 * function's code paths call (the e2e run records the calls, and a test checks every one
 * against these roles and lists grants no call used).
 */
export type Permission =
  | {
      readonly table: TableName;
      readonly actions: readonly string[];
      /** Indexes the function queries (`dynamodb:Query` on `table/<t>/index/<name>`). */
      readonly queries?: readonly string[];
    }
  | { readonly stream: 'outbox' }
  | {
      readonly queues: 'all' | readonly string[];
      readonly actions: readonly string[];
      /** On the groups' DLQs instead of their queues. */
      readonly dlq?: true;
    }
  | { readonly relayFailures: true }
  | { readonly manageConnections: true }
  /**
   * Reads these secrets from their parameters (`ssm:GetParameter` or
   * `secretsmanager:GetSecretValue`); the function gets their `…_PARAM` variables.
   */
  | { readonly secrets: readonly SecretVariable[] }
  /** `lambda:InvokeFunction` on these functions (keys in `serverless.yml`). */
  | { readonly invoke: readonly string[] }
  /**
   * Actions on resources of your own (ARNs or intrinsic functions such as
   * `{ 'Fn::GetAtt': ['OrdersTable', 'Arn'] }`), for a consumer group's handler.
   */
  | { readonly actions: readonly string[]; readonly resources: readonly Json[] };

/** The DynamoDB actions the lists grant (`roles.ts` grants a consumer group's from them too). */
export const GET = 'dynamodb:GetItem';
const PUT = 'dynamodb:PutItem';
export const UPDATE = 'dynamodb:UpdateItem';
const DELETE = 'dynamodb:DeleteItem';
export const QUERY = 'dynamodb:Query';
const BATCH_WRITE = 'dynamodb:BatchWriteItem';
const BATCH_GET = 'dynamodb:BatchGetItem';
/** A `TransactWriteItems` item that only checks a condition (a presence record still held). */
const CONDITION_CHECK = 'dynamodb:ConditionCheckItem';

/** The SQS event source mapping's actions, and the consumer's own visibility changes. */
export const CONSUME = [
  'sqs:ReceiveMessage',
  'sqs:DeleteMessage',
  'sqs:GetQueueAttributes',
  'sqs:ChangeMessageVisibility',
];
/** Parking a message that can never be handled in the group's DLQ (`consumeSqsBatch`). */
export const PARK = ['sqs:SendMessage'];
/**
 * `Gateway.disconnect`: the connection, its session finished, its subscriptions removed; its
 * presence dropped (its records read, each member marked in a transaction with the record's
 * delete and a departure's put; B of the departures' buckets from the pinger layout).
 */
const DISCONNECT: readonly Permission[] = [
  { table: 'connections', actions: [GET, QUERY, BATCH_WRITE, PUT, UPDATE, DELETE] },
  // The session keeps what the connection held at its end (read, conditional put), then
  // its TTL starts (update).
  { table: 'sessions', actions: [GET, PUT, UPDATE] },
];

/**
 * The outbox row of a presence change's `PresenceEvent` (join, leave, expiry), in the
 * change's own transaction, its schema id looked up. The change itself is on `connections`:
 * the member, and the connection's record or departure (Get, Put, Update, Delete, Query).
 */
const PRESENCE_EVENTS: readonly Permission[] = [
  { table: 'outbox', actions: [PUT] },
  { table: 'schemas', actions: [GET] },
];

/** Connect tokens' keys, current and previous. */
const JWT_SECRETS: readonly SecretVariable[] = [
  'LAMBDACABLE_JWT_SECRET',
  'LAMBDACABLE_JWT_SECRET_PREVIOUS',
];
/** Signed stream names' keys, current and previous. */
const STREAMS_SECRETS: readonly SecretVariable[] = [
  'LAMBDACABLE_STREAMS_SECRET',
  'LAMBDACABLE_STREAMS_SECRET_PREVIOUS',
];

/** The permissions of every function in `serverless.yml`, by function name. */
export const functionPermissions: Readonly<Record<string, readonly Permission[]>> = {
  outboxRelay: [
    { stream: 'outbox' },
    { queues: 'all', actions: ['sqs:SendMessage'] },
    { relayFailures: true },
  ],
  broadcast: [
    { queues: ['broadcast'], actions: CONSUME },
    { queues: ['broadcast'], dlq: true, actions: PARK },
    { table: 'schemas', actions: [GET] },
    // The stream's meta and counter and one message per offset; trims past the limit.
    // (Query: whether an older redelivery was appended, or is a redriven message.)
    { table: 'history', actions: [GET, PUT, UPDATE, DELETE, QUERY] },
    {
      table: 'connections',
      // Fan-out; remote commands (disconnect an identity, unsubscribe a stream, which marks
      // the connection changed, then reads the stream's spread item and the stream index
      // until it no longer lists what it removed); removing a connection that answered 410
      // (and dropping its presence: a departure put).
      actions: [GET, QUERY, BATCH_WRITE, DELETE, UPDATE, PUT],
      queries: [STREAM_INDEX, IDENTITY_INDEX],
    },
    // A connection that answered 410 is disconnected: its session closed (read, conditional
    // put, update). Remote unsubscribe and disconnect record a revocation (update).
    { table: 'sessions', actions: [GET, PUT, UPDATE] },
    { manageConnections: true },
    // A large audience is delivered by fan-out tasks, each a `deliver` invocation.
    { invoke: ['deliver'] },
    // A remote unsubscribe leaves the removed subscriptions' presence: their leave events.
    { table: 'outbox', actions: [PUT] },
  ],
  // One fan-out task: reads a slice of a stream's subscribers and posts to them, or hands
  // parts of it to tasks of its own; removes a connection that answered 410.
  // A remote unsubscribe of a large stream runs in tasks too: removes a slice's subscriptions
  // (a conditional delete and the connection's count lowered each).
  deliver: [
    {
      table: 'connections',
      actions: [GET, QUERY, BATCH_WRITE, DELETE, UPDATE, PUT],
      queries: [STREAM_INDEX],
    },
    { table: 'sessions', actions: [GET, PUT, UPDATE] },
    { manageConnections: true },
    { invoke: ['deliver'] },
    // The leave events of the presence a remote unsubscribe in tasks removes.
    ...PRESENCE_EVENTS,
  ],
  // Stores the connection and, on a restore, its subscriptions (placed by their stream's
  // spread, which a throttled write widens) and session; reads the pinger layout (B of the
  // buckets it writes to) once a minute.
  // Verifies connect tokens; authorizes a restored session's signed streams again, and reads
  // the revocations of its streams, identity and sid (BatchGetItem).
  wsConnect: [
    { table: 'connections', actions: [GET, PUT, UPDATE] },
    { table: 'sessions', actions: [GET, PUT, BATCH_GET] },
    { secrets: [...JWT_SECRETS, ...STREAMS_SECRETS] },
  ],
  wsDisconnect: DISCONNECT,
  // Subscribe and unsubscribe (which marks the connection changed for the pinger), history,
  // whispers to a stream's subscribers (one that answers 410 is disconnected), session commits;
  // the connection's rate bucket (GetItem, UpdateItem on its `sk` `r` item); presence
  // `join`, `leave` (an unsubscribe's too) and `presence` (a Query of the stream's members).
  // (A repeated join of the same id checks the connection's record: ConditionCheckItem.)
  // Its event source mapping receives the client frames queue (the `$default` route's).
  wsDefault: [
    {
      queues: [FRAMES],
      actions: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
    },
    ...PRESENCE_EVENTS,
    {
      table: 'connections',
      actions: [GET, PUT, UPDATE, DELETE, QUERY, BATCH_WRITE, CONDITION_CHECK],
      queries: [STREAM_INDEX],
    },
    { table: 'sessions', actions: [GET, PUT, UPDATE] },
    { table: 'history', actions: [GET, QUERY] },
    { manageConnections: true },
    { secrets: STREAMS_SECRETS },
  ],
  // Internet-facing: writes a request's broadcasts in transactions (a `Put` per item), and
  // reads, never writes, the schema registry (the deploy registers the broadcast schemas:
  // infra/deploy/schemas.ts). An Idempotency-Key's record: created, completed, or deleted
  // when the write failed (Powertools Idempotency), read back when its create finds one.
  // A remote `disconnect` reads what its target holds, never writes it: the identity's
  // connections (a Query of IDENTITY_INDEX) and each connection's subscriptions (a Query).
  httpBroadcast: [
    { secrets: ['LAMBDACABLE_BROADCAST_KEY', 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS'] },
    { table: 'outbox', actions: [PUT] },
    { table: 'connections', actions: [QUERY], queries: [IDENTITY_INDEX] },
    { table: 'schemas', actions: [GET] },
    { table: 'idempotency', actions: [GET, PUT, UPDATE, DELETE] },
  ],
  // Reads every connection and subscription, then what changed (a Query per bucket); welcomes
  // new connections (the session claims the welcome); pings, sparing connections whose
  // streams had a broadcast (the streams' meta items); one that answers 410 is disconnected.
  // The coordinator reads the layout and the last runs' reports (a Query), may raise the
  // layout, and invokes itself for the other partitions; each run puts its report.
  // Every second it expires the dropped presence sessions of its buckets (a Query of BUCKET_INDEX).
  pinger: [
    ...DISCONNECT,
    ...PRESENCE_EVENTS,
    { table: 'connections', actions: [PUT], queries: [BUCKET_INDEX] },
    { table: 'sessions', actions: [GET, PUT] },
    { table: 'history', actions: [BATCH_GET] },
    { manageConnections: true },
    { invoke: ['pinger'] },
  ],
};
