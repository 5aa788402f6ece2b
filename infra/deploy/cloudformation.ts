/**
 * CloudFormation for `serverless.yml`, built from the same definitions as the local
 * bootstrap: the tables, the consumer group queues with their DLQs, the stream relay's
 * failure queue, and one least-privilege IAM role per function.
 */

import { DEFAULT_RETRY_SCHEDULE } from '../../lib/messaging/failures';
import {
  BUCKET_INDEX,
  type ConsumerGroupDefinition,
  DEFAULT_FUNCTION_TIMEOUT,
  DLQ_RETENTION_SECONDS,
  consumerGroups as defaultGroups,
  IDENTITY_INDEX,
  pascal,
  queueNames,
  relayFailuresQueueName,
  STREAM_INDEX,
  type TableName,
  tableName,
  tables,
} from './definitions';
import { DEFAULT_MONITORING, type MonitoringSettings, monitoring } from './monitoring';
import {
  defaultSecretParameters,
  type SecretParameters,
  type SecretVariable,
  secretStatements,
} from './secrets';

/** The relay's metric of records it cannot send (alarmed at 1). */
export const RELAY_REFUSED_METRIC = 'relayRefusedRecords';

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type Resource = {
  Type: string;
  Properties: Record<string, Json>;
  DependsOn?: string[];
  DeletionPolicy?: 'Retain' | 'Delete';
  UpdateReplacePolicy?: 'Retain' | 'Delete';
};

/**
 * Tables whose data cannot be rebuilt: committed events not yet relayed (`outbox`), the
 * consumers' ack state (`acks`), and schema ids that encoded payloads refer to (`schemas`).
 * They survive a stack deletion or replacement (`Retain`), refuse a delete (deletion
 * protection) and have point-in-time recovery. The others hold minutes of state (history,
 * sessions, connections) that clients rebuild by reconnecting.
 */
export const STATEFUL_TABLES: readonly TableName[] = ['outbox', 'acks', 'schemas'];

/** Logical id of a table resource, e.g. `OutboxTable`. */
export function tableLogicalId(table: TableName): string {
  return `${pascal(table)}Table`;
}

/** Logical ids of a consumer group's queue and DLQ, e.g. `BroadcastQueue`, `BroadcastDlq`. */
export function queueLogicalIds(group: string): { queue: string; dlq: string } {
  return { queue: `${pascal(group)}Queue`, dlq: `${pascal(group)}Dlq` };
}

/** Environment variable holding a consumer group's queue URL. */
export function queueUrlVariable(group: string): string {
  return `LAMBDACABLE_QUEUE_${group.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}`;
}

/** Environment variable holding a consumer group's DLQ URL (where it parks poison messages). */
export function dlqUrlVariable(group: string): string {
  return `LAMBDACABLE_DLQ_${group.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}`;
}

/** Environment variable holding the relay failures queue URL (where the relay parks records). */
export const RELAY_FAILURES_URL_VARIABLE = 'LAMBDACABLE_RELAY_FAILURES_QUEUE';

/** Environment variable holding a table's physical name. */
export function tableVariable(table: TableName): string {
  return `LAMBDACABLE_TABLE_${table.toUpperCase()}`;
}

/** Environment variable holding the deployed name of the function that runs fan-out tasks. */
export const DELIVER_FUNCTION_VARIABLE = 'LAMBDACABLE_DELIVER_FUNCTION';

/** Where stream records the relay could not deliver after its retries go. */
export const RELAY_FAILURES_QUEUE = 'RelayFailuresQueue';

/** The WebSocket API's logical id, as the Serverless Framework names it. */
const WEBSOCKET_API = 'WebsocketsApi';

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

const GET = 'dynamodb:GetItem';
const PUT = 'dynamodb:PutItem';
const UPDATE = 'dynamodb:UpdateItem';
const DELETE = 'dynamodb:DeleteItem';
const QUERY = 'dynamodb:Query';
const BATCH_WRITE = 'dynamodb:BatchWriteItem';
const BATCH_GET = 'dynamodb:BatchGetItem';
/** A `TransactWriteItems` item that only checks a condition (a presence record still held). */
const CONDITION_CHECK = 'dynamodb:ConditionCheckItem';

/** The SQS event source mapping's actions, and the consumer's own visibility changes. */
const CONSUME = [
  'sqs:ReceiveMessage',
  'sqs:DeleteMessage',
  'sqs:GetQueueAttributes',
  'sqs:ChangeMessageVisibility',
];
/** Parking a message that can never be handled in the group's DLQ (`consumeSqsBatch`). */
const PARK = ['sqs:SendMessage'];
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
      // the connection changed); removing a connection that answered 410 (and dropping its
      // presence: a departure put).
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
  wsDefault: [
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
  httpBroadcast: [
    { secrets: ['LAMBDACABLE_BROADCAST_KEY', 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS'] },
    { table: 'outbox', actions: [PUT] },
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

/**
 * The permissions of a consumer group's function: its own queue (the event source mapping
 * and the nack back-off), the schema registry (to decode events), its ack items when it
 * keeps ack state, and what its definition adds. The built-in `broadcast` has its own list.
 */
export function consumerPermissions(group: ConsumerGroupDefinition): readonly Permission[] {
  const own = functionPermissions[group.name];
  if (own) return own;
  return [
    { queues: [group.name], actions: CONSUME },
    { queues: [group.name], dlq: true, actions: PARK },
    { table: 'schemas', actions: [GET] },
    // The ack state of each partition: read before a batch, a conditional write after it.
    ...(group.ackStore ? [{ table: 'acks' as const, actions: [GET, UPDATE] }] : []),
    ...(group.permissions ?? []),
  ];
}

/** The secrets a function reads (its `secrets` permissions). */
export function functionSecrets(
  key: string,
  groups: readonly ConsumerGroupDefinition[] = defaultGroups,
): SecretVariable[] {
  return (allFunctionPermissions(groups)[key] ?? []).flatMap((p) =>
    'secrets' in p ? p.secrets : [],
  );
}

/** Every function's permissions: the built-in functions and each consumer group's. */
export function allFunctionPermissions(
  groups: readonly ConsumerGroupDefinition[] = defaultGroups,
): Readonly<Record<string, readonly Permission[]>> {
  const out: Record<string, readonly Permission[]> = { ...functionPermissions };
  for (const group of groups) if (group.handler) out[group.name] = consumerPermissions(group);
  return out;
}

/** The visibility timeout of a group's queue: as declared, else 6 × its function's timeout. */
export function visibilityTimeoutOf(group: ConsumerGroupDefinition): number {
  return group.visibilityTimeout ?? 6 * (group.timeout ?? DEFAULT_FUNCTION_TIMEOUT);
}

/**
 * The `functions` entries of the consumer groups that have a handler: each consumes its
 * queue with partial batch responses, under its own role.
 */
export function consumerFunctions(
  groups: readonly ConsumerGroupDefinition[] = defaultGroups,
): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const group of groups) {
    if (!group.handler) continue;
    out[group.name] = {
      handler: group.handler,
      role: roleLogicalId(group.name),
      ...(group.timeout ? { timeout: group.timeout } : {}),
      ...(group.memorySize ? { memorySize: group.memorySize } : {}),
      events: [
        {
          sqs: {
            arn: { 'Fn::GetAtt': [queueLogicalIds(group.name).queue, 'Arn'] },
            batchSize: group.batchSize ?? 10,
            functionResponseType: 'ReportBatchItemFailures',
          },
        },
      ],
    };
  }
  return out;
}

/** Options of {@link cloudFormation}. */
export interface CloudFormationOptions {
  /** Physical name prefix, `<service>-<stage>`. */
  readonly prefix: string;
  /**
   * The stage: `ManageConnections` is granted on this stage's connections only.
   * @default every stage (`*`)
   */
  readonly stage?: string;
  /** The deployed function name of a function key, e.g. `<service>-<stage>-<key>`. */
  readonly functionName: (key: string) => string;
  readonly consumerGroups?: readonly ConsumerGroupDefinition[];
  /** Alarm thresholds and where they go. @default {@link DEFAULT_MONITORING} */
  readonly monitoring?: MonitoringSettings;
  /**
   * Where each secret is stored (`custom.secrets`): the functions that read one may read
   * exactly that parameter. @default {@link defaultSecretParameters} of the stage
   */
  readonly secrets?: SecretParameters;
}

/**
 * The `resources` section: tables, queues, the relay failure queue, the function roles, and
 * the alarms, their topic and the dashboard (`monitoring.ts`).
 */
export function cloudFormation(options: CloudFormationOptions): {
  Resources: Record<string, Resource>;
  Outputs: Record<string, Json>;
} {
  const groups = options.consumerGroups ?? defaultGroups;
  const Resources: Record<string, Resource> = {};
  const Outputs: Record<string, Json> = {};

  for (const [name, def] of Object.entries(tables) as [TableName, (typeof tables)[TableName]][]) {
    const { ttlAttribute, ...rest } = def;
    const stateful = STATEFUL_TABLES.includes(name);
    Resources[tableLogicalId(name)] = {
      Type: 'AWS::DynamoDB::Table',
      ...(stateful ? { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' } : {}),
      Properties: {
        TableName: tableName(options.prefix, name),
        BillingMode: 'PAY_PER_REQUEST',
        ...(JSON.parse(JSON.stringify(rest)) as Record<string, Json>),
        ...(ttlAttribute
          ? { TimeToLiveSpecification: { AttributeName: ttlAttribute, Enabled: true } }
          : {}),
        ...(stateful
          ? {
              PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
              DeletionProtectionEnabled: true,
            }
          : {}),
      },
    };
  }

  for (const group of groups) {
    const names = queueNames(options.prefix, group.name);
    const ids = queueLogicalIds(group.name);
    Resources[ids.dlq] = {
      Type: 'AWS::SQS::Queue',
      Properties: {
        QueueName: names.dlq,
        FifoQueue: true,
        MessageRetentionPeriod: DLQ_RETENTION_SECONDS,
      },
    };
    Resources[ids.queue] = {
      Type: 'AWS::SQS::Queue',
      Properties: {
        QueueName: names.queue,
        FifoQueue: true,
        // Dedup is by event id (the relay sets MessageDeduplicationId), per group so
        // high-throughput FIFO applies.
        ContentBasedDeduplication: false,
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
        VisibilityTimeout: visibilityTimeoutOf(group),
        RedrivePolicy: {
          deadLetterTargetArn: { 'Fn::GetAtt': [ids.dlq, 'Arn'] },
          maxReceiveCount: group.maxReceiveCount ?? DEFAULT_RETRY_SCHEDULE.maxReceiveCount,
        },
      },
    };
    Outputs[`${ids.queue}Url`] = { Value: { Ref: ids.queue } };
  }

  Resources[RELAY_FAILURES_QUEUE] = {
    Type: 'AWS::SQS::Queue',
    Properties: {
      QueueName: relayFailuresQueueName(options.prefix),
      MessageRetentionPeriod: DLQ_RETENTION_SECONDS,
    },
  };

  for (const [key, permissions] of Object.entries(allFunctionPermissions(groups))) {
    Resources[roleLogicalId(key)] = role(key, permissions, options, groups);
  }
  const watched = monitoring({
    prefix: options.prefix,
    functionName: options.functionName,
    groups,
    settings: options.monitoring ?? DEFAULT_MONITORING,
    relayRefusedMetric: RELAY_REFUSED_METRIC,
  });
  Object.assign(Resources, watched.Resources);
  Object.assign(Outputs, watched.Outputs);
  return { Resources, Outputs };
}

/** Logical id of a function's role, e.g. `OutboxRelayRole`. */
export function roleLogicalId(functionKey: string): string {
  return `${pascal(functionKey)}Role`;
}

/** The environment every function gets: table names and queue URLs. */
export function functionEnvironment(
  prefix: string,
  groups: readonly ConsumerGroupDefinition[] = defaultGroups,
): Record<string, Json> {
  const env: Record<string, Json> = {};
  for (const name of Object.keys(tables) as TableName[]) {
    env[tableVariable(name)] = tableName(prefix, name);
  }
  for (const group of groups) {
    env[queueUrlVariable(group.name)] = { Ref: queueLogicalIds(group.name).queue };
    env[dlqUrlVariable(group.name)] = { Ref: queueLogicalIds(group.name).dlq };
  }
  env[RELAY_FAILURES_URL_VARIABLE] = { Ref: RELAY_FAILURES_QUEUE };
  env[DELIVER_FUNCTION_VARIABLE] = `${prefix}-deliver`;
  return env;
}

function role(
  key: string,
  permissions: readonly Permission[],
  options: CloudFormationOptions,
  groups: readonly ConsumerGroupDefinition[],
): Resource {
  const statements: Json[] = [
    {
      Effect: 'Allow',
      Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      Resource: {
        'Fn::Sub': `arn:\${AWS::Partition}:logs:\${AWS::Region}:\${AWS::AccountId}:log-group:/aws/lambda/${options.functionName(key)}:*`,
      },
    },
  ];
  for (const p of permissions) statements.push(...[statement(p, groups, options)].flat());
  return {
    Type: 'AWS::IAM::Role',
    Properties: {
      AssumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { Service: ['lambda.amazonaws.com'] },
            Action: ['sts:AssumeRole'],
          },
        ],
      },
      Policies: [
        {
          PolicyName: `${key}-policy`,
          PolicyDocument: { Version: '2012-10-17', Statement: statements },
        },
      ],
    },
  };
}

function statement(
  p: Permission,
  groups: readonly ConsumerGroupDefinition[],
  options: CloudFormationOptions,
): Json | Json[] {
  if ('resources' in p) {
    return { Effect: 'Allow', Action: [...p.actions], Resource: [...p.resources] };
  }
  if ('secrets' in p) {
    return secretStatements(
      p.secrets,
      options.secrets ?? defaultSecretParameters(options.stage ?? 'dev'),
    );
  }
  if ('invoke' in p) {
    return {
      Effect: 'Allow',
      Action: ['lambda:InvokeFunction'],
      Resource: p.invoke.map((key) => ({
        'Fn::Sub': `arn:\${AWS::Partition}:lambda:\${AWS::Region}:\${AWS::AccountId}:function:${options.functionName(key)}`,
      })),
    };
  }
  if ('table' in p) {
    const arn = { 'Fn::GetAtt': [tableLogicalId(p.table), 'Arn'] };
    const statements: Json[] = p.actions.length
      ? [{ Effect: 'Allow', Action: [...p.actions], Resource: [arn] }]
      : [];
    if (p.queries?.length) {
      statements.push({
        Effect: 'Allow',
        Action: [QUERY],
        Resource: p.queries.map((index) => ({ 'Fn::Join': ['/', [arn, 'index', index]] })),
      });
    }
    return statements;
  }
  if ('stream' in p) {
    return [
      {
        Effect: 'Allow',
        Action: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'],
        Resource: [{ 'Fn::GetAtt': [tableLogicalId('outbox'), 'StreamArn'] }],
      },
      // ListStreams has no resource type: IAM only grants it on "*".
      { Effect: 'Allow', Action: ['dynamodb:ListStreams'], Resource: '*' },
    ];
  }
  if ('queues' in p) {
    const names = p.queues === 'all' ? groups.map((g) => g.name) : p.queues;
    return {
      Effect: 'Allow',
      Action: [...p.actions],
      Resource: names.map((g) => ({
        'Fn::GetAtt': [p.dlq ? queueLogicalIds(g).dlq : queueLogicalIds(g).queue, 'Arn'],
      })),
    };
  }
  if ('relayFailures' in p) {
    return {
      Effect: 'Allow',
      Action: ['sqs:SendMessage'],
      Resource: [{ 'Fn::GetAtt': [RELAY_FAILURES_QUEUE, 'Arn'] }],
    };
  }
  return {
    Effect: 'Allow',
    Action: ['execute-api:ManageConnections'],
    Resource: [
      {
        'Fn::Sub': `arn:\${AWS::Partition}:execute-api:\${AWS::Region}:\${AWS::AccountId}:\${${WEBSOCKET_API}}/${options.stage ?? '*'}/*/@connections/*`,
      },
    ],
  };
}
