/**
 * One least-privilege IAM role per function: the permissions of the built-in functions and of
 * each consumer group's, as `AWS::IAM::Role` resources, and the secrets each function reads.
 */

import { type ConsumerGroupDefinition, consumerGroupsFor } from '../consumers';
import {
  queueLogicalIds,
  RELAY_FAILURES_QUEUE,
  roleLogicalId,
  tableLogicalId,
  WEBSOCKET_API,
} from '../names';
import {
  defaultSecretParameters,
  type SecretParameters,
  type SecretVariable,
  secretStatements,
} from '../secrets';
import {
  CONSUME,
  functionPermissions,
  GET,
  PARK,
  type Permission,
  QUERY,
  UPDATE,
} from './permissions';
import type { Json, Resource } from './types';

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
  groups: readonly ConsumerGroupDefinition[] = consumerGroupsFor(process.env),
): SecretVariable[] {
  return (allFunctionPermissions(groups)[key] ?? []).flatMap((p) =>
    'secrets' in p ? p.secrets : [],
  );
}

/** Every function's permissions: the built-in functions and each consumer group's. */
export function allFunctionPermissions(
  groups: readonly ConsumerGroupDefinition[] = consumerGroupsFor(process.env),
): Readonly<Record<string, readonly Permission[]>> {
  const out: Record<string, readonly Permission[]> = { ...functionPermissions };
  for (const group of groups) if (group.handler) out[group.name] = consumerPermissions(group);
  return out;
}

/** What {@link roleResources} needs of the template's options. */
export interface RoleOptions {
  /** The deployed function name of a function key. */
  readonly functionName: (key: string) => string;
  /** The stage whose connections `ManageConnections` is granted on. @default every stage (`*`) */
  readonly stage?: string;
  /** Where each secret is stored. @default {@link defaultSecretParameters} of the stage */
  readonly secrets?: SecretParameters;
}

/** Every function's role, by logical id. */
export function roleResources(
  options: RoleOptions,
  groups: readonly ConsumerGroupDefinition[],
): Record<string, Resource> {
  const out: Record<string, Resource> = {};
  for (const [key, permissions] of Object.entries(allFunctionPermissions(groups))) {
    out[roleLogicalId(key)] = role(key, permissions, options, groups);
  }
  return out;
}

function role(
  key: string,
  permissions: readonly Permission[],
  options: RoleOptions,
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
  options: RoleOptions,
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
