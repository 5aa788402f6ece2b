import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  queueLogicalIds,
  RELAY_FAILURES_QUEUE,
  roleLogicalId,
  tableLogicalId,
} from '../../infra/deploy/names';
import { type PackagedService, packageService, type Template } from '../helpers/package';
import { validateIamActions, validateTemplate } from '../helpers/template-spec';

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is untyped JSON.
type Json = any;

const OUTBOX = tableLogicalId('outbox');
const QUEUE = queueLogicalIds('broadcast').queue;
const DLQ = queueLogicalIds('broadcast').dlq;

let packaged: PackagedService;

beforeAll(async () => {
  packaged = await packageService('ci');
}, 240_000);

afterAll(async () => {
  await packaged?.remove();
});

/** Every problem both validators find. */
const problemsOf = (template: Template) => [
  ...validateTemplate(template),
  ...validateIamActions(template),
];

/** A deep copy of the packaged template, changed by `edit`. */
function broken(edit: (template: Json) => void): Template {
  const copy = structuredClone(packaged.template);
  edit(copy);
  return copy;
}

function firstOfType(template: Json, type: string): string {
  const id = Object.keys(template.Resources).find((k) => template.Resources[k].Type === type);
  if (!id) throw new Error(`the template has no ${type}`);
  return id;
}

/** The statement of a function's role that `matches`, and the path the validator reports. */
function statementOf(
  template: Json,
  functionKey: string,
  matches: (statement: Json) => boolean,
): { statement: Json; at: string } {
  const role = roleLogicalId(functionKey);
  const statements: Json[] =
    template.Resources[role].Properties.Policies[0].PolicyDocument.Statement;
  const index = statements.findIndex(matches);
  if (index < 0) throw new Error(`no such statement in ${role}`);
  return {
    statement: statements[index],
    at: `${role} (AWS::IAM::Role): Policies[0].PolicyDocument.Statement[${index}]`,
  };
}

const actions = (statement: Json): string[] => [statement.Action].flat();
const grants = (action: string) => (statement: Json) => actions(statement).includes(action);
const onResource = (id: string, attribute: string) => (statement: Json) =>
  JSON.stringify(statement.Resource).includes(JSON.stringify({ 'Fn::GetAtt': [id, attribute] }));

describe('CloudFormation template against the AWS resource specification', () => {
  it('accepts the packaged template', () => {
    expect(validateTemplate(packaged.template)).toEqual([]);
  });

  it('rejects a property the type does not have', () => {
    const template = broken((t) => {
      const props = t.Resources[OUTBOX].Properties;
      props.TableNme = props.TableName;
      delete props.TableName;
    });
    expect(problemsOf(template)).toEqual([
      `${OUTBOX} (AWS::DynamoDB::Table): unknown property "TableNme" (did you mean "TableName"?)`,
    ]);
  });

  it('rejects a property a nested type does not have', () => {
    const template = broken((t) => {
      t.Resources[OUTBOX].Properties.PointInTimeRecoverySpecification = {
        PointInTimeRecoveryEnabld: true,
      };
    });
    expect(problemsOf(template)).toEqual([
      `${OUTBOX} (AWS::DynamoDB::Table): unknown property "PointInTimeRecoverySpecification.PointInTimeRecoveryEnabld" (did you mean "PointInTimeRecoveryEnabled"?)`,
    ]);
  });

  it('rejects a string where the spec expects a list', () => {
    let fn = '';
    const template = broken((t) => {
      fn = firstOfType(t, 'AWS::Lambda::Function');
      t.Resources[fn].Properties.Architectures = 'arm64';
    });
    expect(problemsOf(template)).toEqual([
      `${fn} (AWS::Lambda::Function): property "Architectures" must be List<string>, got string "arm64"`,
    ]);
  });

  it('rejects a word where the spec expects an integer', () => {
    const template = broken((t) => {
      t.Resources[QUEUE].Properties.VisibilityTimeout = 'one minute';
    });
    expect(problemsOf(template)).toEqual([
      `${QUEUE} (AWS::SQS::Queue): property "VisibilityTimeout" must be integer, got string "one minute"`,
    ]);
  });

  it('rejects a string function where the spec expects a list', () => {
    let fn = '';
    const template = broken((t) => {
      fn = firstOfType(t, 'AWS::Lambda::Function');
      t.Resources[fn].Properties.Architectures = { 'Fn::Join': ['', ['arm', '64']] };
    });
    expect(problemsOf(template)).toEqual([
      `${fn} (AWS::Lambda::Function): property "Architectures" must be List<string>, got Fn::Join (which gives a string)`,
    ]);
  });

  it('rejects a resource without a required property', () => {
    let fn = '';
    const template = broken((t) => {
      fn = firstOfType(t, 'AWS::Lambda::Function');
      delete t.Resources[fn].Properties.Role;
    });
    expect(problemsOf(template)).toEqual([
      `${fn} (AWS::Lambda::Function): missing required property "Role"`,
    ]);
  });

  it('rejects a Ref to a resource the template does not have', () => {
    let route = '';
    const template = broken((t) => {
      route = firstOfType(t, 'AWS::ApiGatewayV2::Route');
      t.Resources[route].Properties.ApiId = { Ref: 'WebsocketApi' };
    });
    expect(problemsOf(template)).toEqual([
      `${route} (AWS::ApiGatewayV2::Route): Ref "WebsocketApi" at Properties.ApiId is not a resource, parameter or pseudo parameter`,
    ]);
  });

  it('rejects an output that refers to a resource the template does not have', () => {
    const output = Object.keys(packaged.template.Outputs).find(
      (k) => packaged.template.Outputs[k].Value?.Ref === QUEUE,
    )!;
    const template = broken((t) => {
      t.Outputs[output].Value = { Ref: 'BrodcastQueue' };
    });
    expect(problemsOf(template)).toEqual([
      `Output ${output}: Ref "BrodcastQueue" at Value is not a resource, parameter or pseudo parameter`,
    ]);
  });

  it('rejects a Fn::GetAtt of an attribute the resource type does not have', () => {
    const template = broken((t) => {
      t.Resources[QUEUE].Properties.RedrivePolicy.deadLetterTargetArn = {
        'Fn::GetAtt': [DLQ, 'QueueArn'],
      };
    });
    expect(problemsOf(template)).toEqual([
      `${QUEUE} (AWS::SQS::Queue): Fn::GetAtt "${DLQ}.QueueArn" at Properties.RedrivePolicy.deadLetterTargetArn: AWS::SQS::Queue has no attribute "QueueArn" (it has Arn, QueueName, QueueUrl)`,
    ]);
  });

  it('rejects the string form of Fn::GetAtt of a resource the template does not have', () => {
    const template = broken((t) => {
      t.Resources[QUEUE].Properties.RedrivePolicy.deadLetterTargetArn = {
        'Fn::GetAtt': 'BroadcastDeadLetters.Arn',
      };
    });
    expect(problemsOf(template)).toEqual([
      `${QUEUE} (AWS::SQS::Queue): Fn::GetAtt "BroadcastDeadLetters.Arn" at Properties.RedrivePolicy.deadLetterTargetArn: no resource "BroadcastDeadLetters"`,
    ]);
  });

  it('rejects a Fn::Sub that names a resource the template does not have', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'wsDefault', grants('execute-api:ManageConnections'));
      const sub = found.statement.Resource[0];
      sub['Fn::Sub'] = sub['Fn::Sub'].replace(`\${WebsocketsApi}`, `\${WebsocketApi}`);
      at = found.at.replace(': Policies', `: Fn::Sub "\${WebsocketApi}" at Properties.Policies`);
    });
    expect(problemsOf(template)).toEqual([
      `${at}.Resource[0]: no resource, parameter or pseudo parameter of that name`,
    ]);
  });

  it('rejects a Fn::Sub of an attribute the resource type does not have', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', onResource(RELAY_FAILURES_QUEUE, 'Arn'));
      found.statement.Resource = [{ 'Fn::Sub': `\${${RELAY_FAILURES_QUEUE}.Url}` }];
      at = found.at.replace(
        ': Policies',
        `: Fn::Sub "\${${RELAY_FAILURES_QUEUE}.Url}" at Properties.Policies`,
      );
    });
    expect(problemsOf(template)).toEqual([
      `${at}.Resource[0]: AWS::SQS::Queue has no attribute "Url" (it has Arn, QueueName, QueueUrl)`,
    ]);
  });

  it('rejects a resource type the spec does not have', () => {
    const template = broken((t) => {
      t.Resources[OUTBOX].Type = 'AWS::DynamoDB::Tabel';
    });
    expect(problemsOf(template)).toEqual([
      `${OUTBOX} (AWS::DynamoDB::Tabel): unknown resource type "AWS::DynamoDB::Tabel" (did you mean "AWS::DynamoDB::Table"?)`,
    ]);
  });

  it('rejects a DependsOn on a resource the template does not have', () => {
    const template = broken((t) => {
      t.Resources[QUEUE].DependsOn = [DLQ, 'BroadcastDeadLetters'];
    });
    expect(problemsOf(template)).toEqual([
      `${QUEUE} (AWS::SQS::Queue): DependsOn "BroadcastDeadLetters" is not a resource`,
    ]);
  });
});

describe('IAM policies of the template against the IAM service reference', () => {
  it('accepts the packaged template', () => {
    expect(validateIamActions(packaged.template)).toEqual([]);
  });

  it('rejects an action IAM does not have (a transaction is authorised per item)', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'httpBroadcast', grants('dynamodb:PutItem'));
      found.statement.Action = [...actions(found.statement), 'dynamodb:TransactWriteItems'];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: "dynamodb:TransactWriteItems" is not an IAM action`,
    ]);
  });

  it('rejects a misspelt action and names the one it resembles', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', grants('sqs:SendMessage'));
      found.statement.Action = ['sqs:SendMesage'];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: "sqs:SendMesage" is not an IAM action (did you mean "sqs:SendMessage"?)`,
    ]);
  });

  it('rejects a wildcard that matches no action', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', grants('logs:PutLogEvents'));
      found.statement.Action = ['logs:Crate*', 'logs:PutLogEvents'];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([`${at}: "logs:Crate*" matches no logs action`]);
  });

  it('rejects an action without resource-level permissions scoped to an ARN', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', grants('dynamodb:ListStreams'));
      found.statement.Resource = [{ 'Fn::GetAtt': [OUTBOX, 'StreamArn'] }];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: "dynamodb:ListStreams" supports no resource-level permissions and needs "Resource": "*", not ${OUTBOX}.StreamArn (dynamodb stream)`,
    ]);
  });

  it('rejects an action on a resource of another service', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', onResource(RELAY_FAILURES_QUEUE, 'Arn'));
      found.statement.Resource = [{ 'Fn::GetAtt': [OUTBOX, 'Arn'] }];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: "sqs:SendMessage" does not apply to ${OUTBOX}.Arn (dynamodb table); it applies to sqs queue`,
    ]);
  });

  it('rejects a stream action on the table rather than its stream', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', grants('dynamodb:GetRecords'));
      found.statement.Resource = [{ 'Fn::GetAtt': [OUTBOX, 'Arn'] }];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual(
      actions(
        statementOf(packaged.template, 'outboxRelay', grants('dynamodb:GetRecords')).statement,
      ).map(
        (action) =>
          `${at}: "${action}" does not apply to ${OUTBOX}.Arn (dynamodb table); it applies to dynamodb stream`,
      ),
    );
  });

  it('rejects a resource that none of the statement’s actions applies to', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', onResource(RELAY_FAILURES_QUEUE, 'Arn'));
      found.statement.Resource = [
        { 'Fn::GetAtt': [RELAY_FAILURES_QUEUE, 'Arn'] },
        { 'Fn::GetAtt': [OUTBOX, 'StreamArn'] },
      ];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: none of "sqs:SendMessage" applies to ${OUTBOX}.StreamArn (dynamodb stream)`,
    ]);
  });

  it('rejects a Ref where IAM needs an ARN (a queue’s Ref is its URL)', () => {
    let at = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', onResource(RELAY_FAILURES_QUEUE, 'Arn'));
      found.statement.Resource = [{ Ref: RELAY_FAILURES_QUEUE }];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: Resource Ref ${RELAY_FAILURES_QUEUE} gives the AWS::SQS::Queue's QueueUrl, not an ARN`,
    ]);
  });

  it('rejects a log group ARN where the log actions need its log streams', () => {
    let at = '';
    let arn = '';
    const template = broken((t) => {
      const found = statementOf(t, 'outboxRelay', grants('logs:PutLogEvents'));
      arn = found.statement.Resource['Fn::Sub'].replace(/:\*$/, '');
      found.statement.Resource = { 'Fn::Sub': arn };
      at = found.at;
    });
    expect(problemsOf(template)).toEqual(
      ['logs:CreateLogStream', 'logs:PutLogEvents'].map(
        (action) =>
          `${at}: "${action}" does not apply to ${JSON.stringify(arn)}; it applies to logs log-stream`,
      ),
    );
  });

  it('rejects ManageConnections on an ARN that is not an execute-api one', () => {
    let at = '';
    let arn = '';
    const template = broken((t) => {
      const found = statementOf(t, 'wsDefault', grants('execute-api:ManageConnections'));
      arn = found.statement.Resource[0]['Fn::Sub'].replace(':execute-api:', ':apigateway:');
      found.statement.Resource = [{ 'Fn::Sub': arn }];
      at = found.at;
    });
    expect(problemsOf(template)).toEqual([
      `${at}: "execute-api:ManageConnections" does not apply to ${JSON.stringify(arn)}; it applies to execute-api execute-api-general`,
    ]);
  });
});
