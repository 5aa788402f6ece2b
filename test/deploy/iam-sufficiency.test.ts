import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_STAGE } from '../../infra/local/stack';
import type { RecordedCall } from '../../lib/adapters/aws/call-log';
import {
  evaluateRoles,
  functionsOf,
  type IamRequest,
  platformRequests,
  requestsOf,
} from '../helpers/iam';
import { type PackagedService, packageService, type Template } from '../helpers/package';

/**
 * The checker behind the e2e IAM test (test/e2e/system.test.ts records the real calls):
 * here it must refuse a role that lacks a permission and list a grant nothing uses.
 */
describe('IAM sufficiency check', () => {
  let packaged: PackagedService;
  const call = (fn: string, client: string, operation: string, input: Record<string, unknown>) =>
    ({ function: `lambdacable-local-${fn}`, client, operation, input }) as RecordedCall;
  const calls: RecordedCall[] = [
    call('wsConnect', 'DynamoDBClient', 'PutItem', { TableName: 'lambdacable-local-connections' }),
    call('pinger', 'DynamoDBClient', 'BatchGetItem', {
      RequestItems: ['lambdacable-local-history'],
    }),
    call('broadcast', 'DynamoDBClient', 'TransactWriteItems', {
      TransactItems: [
        { Update: 'lambdacable-local-history' },
        { Put: 'lambdacable-local-history' },
      ],
    }),
    call('broadcast', 'DynamoDBClient', 'Query', {
      TableName: 'lambdacable-local-connections',
      IndexName: 'byStreamShard',
    }),
    call('pinger', 'LambdaClient', 'Invoke', { FunctionName: 'lambdacable-local-pinger' }),
    call('outboxRelay', 'SQSClient', 'SendMessageBatch', {
      QueueUrl: 'http://127.0.0.1:9324/000000000000/lambdacable-local-broadcast.fifo',
    }),
    call('wsConnect', 'SSMClient', 'GetParameter', {
      Name: '/lambdacable/local/jwt-secret',
      WithDecryption: true,
    }),
  ];
  const requestsFor = (template: Template): IamRequest[] => {
    const fns = functionsOf(template);
    return calls.flatMap((c) => requestsOf(c, fns.find((f) => f.name === c.function)!.key));
  };
  const copy = (): Template => structuredClone(packaged.template);
  const statementsOf = (t: Template, role: string) =>
    // biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
    t.Resources[role]!.Properties.Policies[0].PolicyDocument.Statement as any[];

  beforeAll(async () => {
    packaged = await packageService(LOCAL_STAGE);
  }, 120_000);
  afterAll(async () => {
    await packaged?.remove();
  });

  it('maps a transaction to the action of each item and a batch to its single-message action', () => {
    const requests = requestsFor(packaged.template);
    expect(requests.map((r) => r.action)).toEqual([
      'dynamodb:PutItem',
      'dynamodb:BatchGetItem',
      'dynamodb:UpdateItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'lambda:InvokeFunction',
      'sqs:SendMessage',
      'ssm:GetParameter',
    ]);
    expect(requests[7]!.resource).toBe(
      'arn:aws:ssm:us-east-1:123456789012:parameter/lambdacable/local/jwt-secret',
    );
    expect(requests[4]!.resource).toMatch(
      /table\/lambdacable-local-connections\/index\/byStreamShard$/,
    );
  });

  it('allows these calls and what the platform does with the roles of the real template', async () => {
    const { denied } = await evaluateRoles(packaged.template, [
      ...requestsFor(packaged.template),
      ...platformRequests(packaged.template),
    ]);
    expect(denied).toEqual([]);
  });

  it('gives the internet-facing httpBroadcast no write on the schema registry, only GetItem', async () => {
    const schemas = { TableName: 'lambdacable-local-schemas' };
    const requests = [
      ...['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'].map((operation) =>
        call('httpBroadcast', 'DynamoDBClient', operation, schemas),
      ),
      call('httpBroadcast', 'DynamoDBClient', 'BatchWriteItem', {
        RequestItems: [schemas.TableName],
      }),
    ].flatMap((c) => requestsOf(c, 'httpBroadcast'));
    const registration = requestsOf(
      call('httpBroadcast', 'DynamoDBClient', 'TransactWriteItems', {
        TransactItems: [{ Put: 'lambdacable-local-schemas' }],
      }),
      'httpBroadcast',
    );
    const { denied } = await evaluateRoles(packaged.template, [...requests, ...registration]);
    expect(denied.map((d) => d.action).sort()).toEqual([
      'dynamodb:BatchWriteItem',
      'dynamodb:DeleteItem',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
    ]);
  });

  it('lets only the pinger invoke itself (it starts its partitions)', async () => {
    const invoke = (fn: string) =>
      requestsOf(
        call(fn, 'LambdaClient', 'Invoke', { FunctionName: 'lambdacable-local-pinger' }),
        fn,
      );
    const { denied } = await evaluateRoles(packaged.template, [
      ...invoke('pinger'),
      ...invoke('wsConnect'),
    ]);
    expect(denied.map((d) => `${d.function} ${d.action}`)).toEqual([
      'wsConnect lambda:InvokeFunction',
    ]);
  });

  it("lets each function read only its own secrets' parameters", async () => {
    const read = (fn: string, name: string) =>
      requestsOf(call(fn, 'SSMClient', 'GetParameter', { Name: name }), fn);
    const { denied } = await evaluateRoles(packaged.template, [
      ...read('wsConnect', '/lambdacable/local/jwt-secret'),
      ...read('wsConnect', '/lambdacable/local/jwt-secret-previous'),
      ...read('wsConnect', '/lambdacable/local/streams-secret'),
      ...read('wsDefault', '/lambdacable/local/streams-secret-previous'),
      ...read('httpBroadcast', '/lambdacable/local/broadcast-key'),
      ...read('wsDefault', '/lambdacable/local/jwt-secret'),
      ...read('httpBroadcast', '/lambdacable/local/streams-secret'),
      ...read('pinger', '/lambdacable/local/broadcast-key'),
      ...read('wsConnect', '/lambdacable/local/other'),
    ]);
    expect(denied.map((d) => `${d.function} ${d.resource.split(':').pop()}`).sort()).toEqual([
      'httpBroadcast parameter/lambdacable/local/streams-secret',
      'pinger parameter/lambdacable/local/broadcast-key',
      'wsConnect parameter/lambdacable/local/other',
      'wsDefault parameter/lambdacable/local/jwt-secret',
    ]);
  });

  it('refuses a role that lacks a permission its function uses', async () => {
    const broken = copy();
    for (const s of statementsOf(broken, 'WsConnectRole')) {
      s.Action = [s.Action].flat().filter((a: string) => a !== 'dynamodb:PutItem');
    }
    const { denied } = await evaluateRoles(broken, requestsFor(broken));
    expect(denied.map((d) => `${d.function} ${d.action} ${d.result}`)).toEqual([
      'wsConnect dynamodb:PutItem ImplicitlyDenied',
    ]);
  });

  it('refuses an index the role does not name, and a stream scoped ListStreams', async () => {
    const broken = copy();
    for (const s of statementsOf(broken, 'BroadcastRole')) {
      if (JSON.stringify(s.Resource).includes('byStreamShard')) s.Resource = [];
    }
    for (const s of statementsOf(broken, 'OutboxRelayRole')) {
      if (s.Resource === '*') s.Resource = [{ 'Fn::GetAtt': ['OutboxTable', 'StreamArn'] }];
    }
    const { denied } = await evaluateRoles(broken, [
      ...requestsFor(broken),
      ...platformRequests(broken),
    ]);
    expect(denied.map((d) => `${d.function} ${d.action}`).sort()).toEqual([
      'broadcast dynamodb:Query',
      'outboxRelay dynamodb:ListStreams',
    ]);
  });

  it('lists a grant that no call uses', async () => {
    const extended = copy();
    statementsOf(extended, 'WsDisconnectRole').push({
      Effect: 'Allow',
      Action: ['dynamodb:Scan'],
      Resource: [{ 'Fn::GetAtt': ['ConnectionsTable', 'Arn'] }],
    });
    const { unused } = await evaluateRoles(extended, requestsFor(extended));
    expect(unused).toContainEqual({
      function: 'wsDisconnect',
      action: 'dynamodb:Scan',
      resource: 'arn:aws:dynamodb:us-east-1:123456789012:table/lambdacable-local-connections',
    });
  });
});
