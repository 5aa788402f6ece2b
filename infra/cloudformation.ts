/**
 * CloudFormation for `serverless.yml`, built from the same definitions as the local
 * bootstrap: the tables, the consumer group queues with their DLQs, the stream relay's
 * failure queue, and one least-privilege IAM role per function.
 */

import {
  type ConsumerGroupDefinition,
  DLQ_RETENTION_SECONDS,
  consumerGroups as defaultGroups,
  queueNames,
  type TableName,
  tableName,
  tables,
} from './definitions';

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type Resource = { Type: string; Properties: Record<string, Json>; DependsOn?: string[] };

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

/** Environment variable holding a table's physical name. */
export function tableVariable(table: TableName): string {
  return `LAMBDACABLE_TABLE_${table.toUpperCase()}`;
}

/** Where stream records the relay could not deliver after its retries go. */
export const RELAY_FAILURES_QUEUE = 'RelayFailuresQueue';

/** The WebSocket API's logical id, as the Serverless Framework names it. */
const WEBSOCKET_API = 'WebsocketsApi';

/** What each function may do, resource by resource. */
export type Permission =
  | { readonly table: TableName; readonly actions: readonly string[]; readonly indexes?: boolean }
  | { readonly stream: 'outbox' }
  | { readonly queues: 'all' | readonly string[]; readonly actions: readonly string[] }
  | { readonly relayFailures: true }
  | { readonly manageConnections: true }
  | { readonly invoke: string };

const READ = ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:BatchGetItem'];
const WRITE = [
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:BatchWriteItem',
];
const TX = ['dynamodb:ConditionCheckItem'];
const CONSUME = [
  'sqs:ReceiveMessage',
  'sqs:DeleteMessage',
  'sqs:ChangeMessageVisibility',
  'sqs:GetQueueAttributes',
];
const connections: Permission = {
  table: 'connections',
  actions: [...READ, ...WRITE],
  indexes: true,
};
const sessions: Permission = { table: 'sessions', actions: [...READ, ...WRITE] };
const history: Permission = { table: 'history', actions: [...READ, ...WRITE] };
const schemasRead: Permission = { table: 'schemas', actions: READ };

/** The permissions of every function in `serverless.yml`, by function name. */
export const functionPermissions: Readonly<Record<string, readonly Permission[]>> = {
  outboxRelay: [
    { stream: 'outbox' },
    { queues: 'all', actions: ['sqs:SendMessage'] },
    { relayFailures: true },
  ],
  broadcast: [
    { queues: ['broadcast'], actions: CONSUME },
    { table: 'acks', actions: [...READ, ...WRITE] },
    schemasRead,
    history,
    connections,
    { manageConnections: true },
  ],
  wsConnect: [connections, sessions, { invoke: 'wsWelcome' }],
  wsWelcome: [connections, sessions, { manageConnections: true }],
  wsDisconnect: [connections, sessions],
  wsDefault: [connections, sessions, history, { manageConnections: true }],
  httpBroadcast: [
    { table: 'outbox', actions: ['dynamodb:PutItem', 'dynamodb:BatchWriteItem', ...TX] },
    { table: 'schemas', actions: [...READ, ...WRITE, 'dynamodb:TransactWriteItems'] },
  ],
  // A connection that answers 410 is disconnected: its session is finished.
  pinger: [connections, sessions, { manageConnections: true }],
};

/** Options of {@link cloudFormation}. */
export interface CloudFormationOptions {
  /** Physical name prefix, `<service>-<stage>`. */
  readonly prefix: string;
  /** The deployed function name of a function key, e.g. `<service>-<stage>-<key>`. */
  readonly functionName: (key: string) => string;
  readonly consumerGroups?: readonly ConsumerGroupDefinition[];
}

/** The `resources` section: tables, queues, the relay failure queue and the function roles. */
export function cloudFormation(options: CloudFormationOptions): {
  Resources: Record<string, Resource>;
  Outputs: Record<string, Json>;
} {
  const groups = options.consumerGroups ?? defaultGroups;
  const Resources: Record<string, Resource> = {};
  const Outputs: Record<string, Json> = {};

  for (const [name, def] of Object.entries(tables) as [TableName, (typeof tables)[TableName]][]) {
    const { ttlAttribute, ...rest } = def;
    Resources[tableLogicalId(name)] = {
      Type: 'AWS::DynamoDB::Table',
      Properties: {
        TableName: tableName(options.prefix, name),
        BillingMode: 'PAY_PER_REQUEST',
        ...(JSON.parse(JSON.stringify(rest)) as Record<string, Json>),
        ...(ttlAttribute
          ? { TimeToLiveSpecification: { AttributeName: ttlAttribute, Enabled: true } }
          : {}),
        ...(name === 'outbox'
          ? { PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } }
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
        VisibilityTimeout: group.visibilityTimeout ?? 60,
        RedrivePolicy: {
          deadLetterTargetArn: { 'Fn::GetAtt': [ids.dlq, 'Arn'] },
          maxReceiveCount: group.maxReceiveCount ?? 5,
        },
      },
    };
    Outputs[`${ids.queue}Url`] = { Value: { Ref: ids.queue } };
  }

  Resources[RELAY_FAILURES_QUEUE] = {
    Type: 'AWS::SQS::Queue',
    Properties: {
      QueueName: `${options.prefix}-relay-failures`,
      MessageRetentionPeriod: DLQ_RETENTION_SECONDS,
    },
  };

  for (const [key, permissions] of Object.entries(functionPermissions)) {
    Resources[roleLogicalId(key)] = role(key, permissions, options, groups);
  }
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
  for (const group of groups)
    env[queueUrlVariable(group.name)] = { Ref: queueLogicalIds(group.name).queue };
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
  for (const p of permissions) statements.push(statement(p, options, groups));
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
  options: CloudFormationOptions,
  groups: readonly ConsumerGroupDefinition[],
): Json {
  if ('table' in p) {
    const arn = { 'Fn::GetAtt': [tableLogicalId(p.table), 'Arn'] };
    const resources: Json[] = [arn];
    if (p.indexes) resources.push({ 'Fn::Join': ['/', [arn, 'index', '*']] });
    return { Effect: 'Allow', Action: [...p.actions], Resource: resources };
  }
  if ('stream' in p) {
    return {
      Effect: 'Allow',
      Action: [
        'dynamodb:DescribeStream',
        'dynamodb:GetRecords',
        'dynamodb:GetShardIterator',
        'dynamodb:ListStreams',
      ],
      Resource: [{ 'Fn::GetAtt': [tableLogicalId('outbox'), 'StreamArn'] }],
    };
  }
  if ('queues' in p) {
    const names = p.queues === 'all' ? groups.map((g) => g.name) : p.queues;
    return {
      Effect: 'Allow',
      Action: [...p.actions],
      Resource: names.map((g) => ({ 'Fn::GetAtt': [queueLogicalIds(g).queue, 'Arn'] })),
    };
  }
  if ('relayFailures' in p) {
    return {
      Effect: 'Allow',
      Action: ['sqs:SendMessage'],
      Resource: [{ 'Fn::GetAtt': [RELAY_FAILURES_QUEUE, 'Arn'] }],
    };
  }
  if ('manageConnections' in p) {
    return {
      Effect: 'Allow',
      Action: ['execute-api:ManageConnections'],
      Resource: [
        {
          'Fn::Sub': `arn:\${AWS::Partition}:execute-api:\${AWS::Region}:\${AWS::AccountId}:\${${WEBSOCKET_API}}/*/*/@connections/*`,
        },
      ],
    };
  }
  return {
    Effect: 'Allow',
    Action: ['lambda:InvokeFunction'],
    Resource: [
      {
        'Fn::Sub': `arn:\${AWS::Partition}:lambda:\${AWS::Region}:\${AWS::AccountId}:function:${options.functionName(p.invoke)}`,
      },
    ],
  };
}

function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}
