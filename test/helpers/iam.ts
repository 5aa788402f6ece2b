/**
 * IAM sufficiency: the AWS calls each function made in a run (recorded by
 * lib/adapters/aws/call-log.ts), turned into IAM requests (action + resource ARN), evaluated
 * against that function's role in the generated template with @cloud-copilot/iam-simulate.
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { RecordedCall } from '../../lib/adapters/aws/call-log';
import type { Template } from './package';

/** The account, region and API id the template's intrinsics resolve to. */
export const ACCOUNT = '123456789012';
export const REGION = 'us-east-1';
const API_ID = 'wsapi00001';
const STREAM_LABEL = '2026-01-01T00:00:00.000';

/** One IAM request a function's role must allow. */
export interface IamRequest {
  /** The function key, e.g. `wsConnect`. */
  readonly function: string;
  readonly action: string;
  readonly resource: string;
  /** What made it: `code` (a recorded SDK call) or the platform (event source mapping, logs). */
  readonly by: string;
}

/** A grant of a role: one action on one resource pattern of one statement. */
export interface Grant {
  readonly function: string;
  readonly action: string;
  readonly resource: string;
}

// biome-ignore lint/suspicious/noExplicitAny: CloudFormation values are untyped JSON.
type Json = any;

/** The deployed functions of a template: key, physical name, role logical id. */
export function functionsOf(template: Template): { key: string; name: string; role: string }[] {
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === 'AWS::Lambda::Function')
    .map(([id, r]) => {
      const key = id.replace(/LambdaFunction$/, '');
      return {
        key: key[0]!.toLowerCase() + key.slice(1),
        name: r.Properties.FunctionName as string,
        role: r.Properties.Role['Fn::GetAtt'][0] as string,
      };
    });
}

/** Resolves the intrinsics a role or mapping uses to concrete values. */
export function resolve(template: Template, value: Json): Json {
  if (Array.isArray(value)) return value.map((v) => resolve(template, v));
  if (value === null || typeof value !== 'object') return value;
  if ('Ref' in value) return ref(template, value.Ref);
  if ('Fn::GetAtt' in value) {
    const [id, attribute] = value['Fn::GetAtt'] as [string, string];
    return getAtt(template, id, attribute);
  }
  if ('Fn::Sub' in value) {
    const text = value['Fn::Sub'] as string;
    return text.replace(/\$\{([^}]+)\}/g, (_, name: string) => {
      const [id, attribute] = name.split('.');
      return String(attribute ? getAtt(template, id!, attribute) : ref(template, id!));
    });
  }
  if ('Fn::Join' in value) {
    const [separator, parts] = value['Fn::Join'] as [string, Json[]];
    return parts.map((p) => resolve(template, p)).join(separator);
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(template, v)]));
}

function ref(template: Template, id: string): string {
  const pseudo: Record<string, string> = {
    'AWS::Partition': 'aws',
    'AWS::Region': REGION,
    'AWS::AccountId': ACCOUNT,
    'AWS::URLSuffix': 'amazonaws.com',
  };
  if (id in pseudo) return pseudo[id]!;
  const resource = template.Resources[id];
  if (!resource) throw new Error(`Ref to unknown resource ${id}`);
  if (resource.Type === 'AWS::ApiGatewayV2::Api') return API_ID;
  if (resource.Type === 'AWS::SQS::Queue') {
    return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${resource.Properties.QueueName}`;
  }
  return resource.Properties.FunctionName ?? resource.Properties.TableName ?? id;
}

function getAtt(template: Template, id: string, attribute: string): string {
  const resource = template.Resources[id];
  if (!resource) throw new Error(`Fn::GetAtt of unknown resource ${id}`);
  const p = resource.Properties;
  switch (`${resource.Type}.${attribute}`) {
    case 'AWS::DynamoDB::Table.Arn':
      return tableArn(p.TableName);
    case 'AWS::DynamoDB::Table.StreamArn':
      return `${tableArn(p.TableName)}/stream/${STREAM_LABEL}`;
    case 'AWS::SQS::Queue.Arn':
      return `arn:aws:sqs:${REGION}:${ACCOUNT}:${p.QueueName}`;
    case 'AWS::Lambda::Function.Arn':
      return functionArn(p.FunctionName);
    case 'AWS::IAM::Role.Arn':
      return `arn:aws:iam::${ACCOUNT}:role/${id}`;
    default:
      throw new Error(`cannot resolve Fn::GetAtt ${id}.${attribute} (${resource.Type})`);
  }
}

const tableArn = (name: string) => `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${name}`;
const functionArn = (name: string) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${name}`;
const queueArn = (url: string) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${url.split('/').pop()}`;

/** The IAM requests behind one recorded SDK call (IAM authorises a transaction per item). */
export function requestsOf(call: RecordedCall, fn: string): IamRequest[] {
  const by = 'code';
  const input = call.input as Record<string, Json>;
  const one = (action: string, resource: string): IamRequest => ({
    function: fn,
    action,
    resource,
    by,
  });
  switch (call.client) {
    case 'DynamoDBClient': {
      if (call.operation === 'TransactWriteItems' || call.operation === 'TransactGetItems') {
        const actions: Record<string, string> = {
          Put: 'PutItem',
          Update: 'UpdateItem',
          Delete: 'DeleteItem',
          ConditionCheck: 'ConditionCheckItem',
          Get: 'GetItem',
        };
        return (input.TransactItems as Record<string, string>[]).flatMap((item) =>
          Object.entries(item).map(([kind, table]) =>
            one(`dynamodb:${actions[kind]}`, tableArn(table)),
          ),
        );
      }
      if (call.operation === 'BatchWriteItem' || call.operation === 'BatchGetItem') {
        return (input.RequestItems as string[]).map((table) =>
          one(`dynamodb:${call.operation}`, tableArn(table)),
        );
      }
      const table = tableArn(input.TableName);
      return [
        one(
          `dynamodb:${call.operation}`,
          input.IndexName ? `${table}/index/${input.IndexName}` : table,
        ),
      ];
    }
    case 'SQSClient':
      // A batch is authorised as its single-message action.
      return [one(`sqs:${call.operation.replace(/Batch$/, '')}`, queueArn(input.QueueUrl))];
    case 'ApiGatewayManagementApiClient': {
      const method: Record<string, string> = {
        PostToConnection: 'POST',
        DeleteConnection: 'DELETE',
        GetConnection: 'GET',
      };
      const stage = new URL(call.endpoint ?? 'https://x/').pathname.split('/')[1] || 'local';
      return [
        one(
          'execute-api:ManageConnections',
          `arn:aws:execute-api:${REGION}:${ACCOUNT}:${API_ID}/${stage}/${method[call.operation]}/@connections/${input.ConnectionId}`,
        ),
      ];
    }
    case 'LambdaClient':
      return [one(`lambda:${call.operation}Function`, functionArn(input.FunctionName))];
    case 'SSMClient': {
      // GetParameter takes a name (with or without its leading slash) or an ARN.
      const name = String(input.Name);
      return [
        one(
          `ssm:${call.operation}`,
          name.startsWith('arn:')
            ? name
            : `arn:aws:ssm:${REGION}:${ACCOUNT}:parameter/${name.replace(/^\//, '')}`,
        ),
      ];
    }
    case 'SecretsManagerClient': {
      // A secret's ARN ends in six random characters after its name.
      const id = String(input.SecretId);
      return [
        one(
          `secretsmanager:${call.operation}`,
          id.startsWith('arn:')
            ? id
            : `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:${id}-AbCdEf`,
        ),
      ];
    }
    default:
      throw new Error(`no IAM mapping for ${call.client}.${call.operation}`);
  }
}

/**
 * What the platform does with a function's role, from the template: Lambda writes its
 * logs; an event source mapping reads its stream or queue and sends to its on-failure
 * destination. AWS documents these permissions as required for each mapping type.
 */
export function platformRequests(template: Template): IamRequest[] {
  const fns = functionsOf(template);
  const out: IamRequest[] = [];
  for (const fn of fns) {
    const logStream = `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:/aws/lambda/${fn.name}:log-stream:2026/01/01/[$LATEST]0`;
    for (const action of ['logs:CreateLogStream', 'logs:PutLogEvents'])
      out.push({ function: fn.key, action, resource: logStream, by: 'Lambda logs' });
  }
  for (const [, mapping] of Object.entries(template.Resources).filter(
    ([, r]) => r.Type === 'AWS::Lambda::EventSourceMapping',
  )) {
    const p = mapping.Properties;
    const fn = fns.find((f) => f.key === keyOfLogicalId(p.FunctionName['Fn::GetAtt'][0]))!;
    const source = resolve(template, p.EventSourceArn) as string;
    const push = (action: string, resource: string, by: string) =>
      out.push({ function: fn.key, action, resource, by });
    if (source.includes(':dynamodb:')) {
      for (const action of ['DescribeStream', 'GetRecords', 'GetShardIterator'])
        push(`dynamodb:${action}`, source, 'stream event source mapping');
      push('dynamodb:ListStreams', '*', 'stream event source mapping');
      const destination = p.DestinationConfig?.OnFailure?.Destination;
      if (destination)
        push('sqs:SendMessage', resolve(template, destination), 'on-failure destination');
    } else {
      for (const action of ['ReceiveMessage', 'DeleteMessage', 'GetQueueAttributes'])
        push(`sqs:${action}`, source, 'SQS event source mapping');
    }
  }
  return out;
}

function keyOfLogicalId(id: string): string {
  const key = id.replace(/LambdaFunction$/, '');
  return key[0]!.toLowerCase() + key.slice(1);
}

/** The result of {@link evaluateRoles}. */
export interface IamEvaluation {
  /** Requests the role does not allow, with the simulator's verdict. */
  readonly denied: (IamRequest & { readonly result: string })[];
  /** Grants no request used. */
  readonly unused: Grant[];
  /** How many distinct requests were evaluated. */
  readonly evaluated: number;
}

/** Evaluates every request against its function's role; lists what is denied and unused. */
export async function evaluateRoles(
  template: Template,
  requests: readonly IamRequest[],
): Promise<IamEvaluation> {
  const fns = functionsOf(template);
  const denied: (IamRequest & { result: string })[] = [];
  const used = new Set<string>();
  const grants: Grant[] = [];
  const unique = new Map(requests.map((r) => [`${r.function} ${r.action} ${r.resource}`, r]));
  for (const fn of fns) {
    const statements = rolePolicyStatements(template, fn.role);
    for (const [i, s] of statements.entries()) {
      for (const action of [s.Action].flat() as string[]) {
        for (const resource of [s.Resource].flat() as string[])
          grants.push({ function: fn.key, action, resource: `${i}|${resource}` });
      }
    }
    const policy = {
      Version: '2012-10-17',
      Statement: statements.map((s, i) => ({ ...s, Sid: `s${i}` })),
    };
    for (const request of [...unique.values()].filter((r) => r.function === fn.key)) {
      const response = await runSimulation(
        {
          request: {
            principal: `arn:aws:iam::${ACCOUNT}:role/${fn.role}`,
            action: request.action,
            resource: { resource: request.resource, accountId: ACCOUNT },
            contextVariables: {},
          },
          identityPolicies: [{ name: fn.role, policy }],
          serviceControlPolicies: [],
          resourceControlPolicies: [],
        },
        {},
      );
      if (response.resultType === 'error') {
        denied.push({ ...request, result: `error: ${JSON.stringify(response.errors)}` });
        continue;
      }
      if (response.overallResult !== 'Allowed') {
        denied.push({ ...request, result: response.overallResult });
        continue;
      }
      if (response.resultType !== 'single') continue;
      for (const allow of response.result.analysis?.identityAnalysis?.allowStatements ?? []) {
        const i = Number(allow.explain.identifier.slice(1));
        const actions = [allow.explain.actions ?? []].flat();
        const resources = [allow.explain.resources ?? []].flat();
        for (const a of actions.filter((x) => x.matches)) {
          for (const r of resources.filter((x) => x.matches))
            used.add(`${fn.key} ${a.action} ${i}|${r.resource}`);
        }
      }
    }
  }
  const unused = grants
    .filter((g) => !used.has(`${g.function} ${g.action} ${g.resource}`))
    .map((g) => ({ ...g, resource: g.resource.slice(g.resource.indexOf('|') + 1) }));
  return { denied, unused, evaluated: unique.size };
}

/** A role's statements with intrinsics resolved. */
function rolePolicyStatements(template: Template, roleId: string): Json[] {
  const role = template.Resources[roleId];
  if (!role) throw new Error(`no role ${roleId} in the template`);
  return (role.Properties.Policies as Json[]).flatMap(
    (p) => resolve(template, p.PolicyDocument).Statement as Json[],
  );
}
