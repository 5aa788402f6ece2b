import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerGroups, tableName, tables } from '../../infra/definitions';

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is untyped JSON.
type Resource = { Type: string; Properties: Record<string, any>; DependsOn?: unknown };

/** `serverless package` offline, without AWS credentials, and the template it generates. */
describe('serverless package (osls + serverless-esbuild)', () => {
  let dir: string;
  let resources: Record<string, Resource>;
  let artifacts: string[];
  const ofType = (type: string) =>
    Object.entries(resources).filter(([, r]) => r.Type === type) as [string, Resource][];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lambdacable-package-'));
    const env: Record<string, string | undefined> = { ...process.env };
    for (const name of Object.keys(env)) {
      if (name.startsWith('AWS_') || name.startsWith('LAMBDACABLE_')) delete env[name];
    }
    await promisify(execFile)(
      process.execPath,
      ['node_modules/serverless/bin/serverless.js', 'package', '--stage', 'ci', '--package', dir],
      {
        env: {
          ...env,
          SLS_TELEMETRY_DISABLED: '1',
          LAMBDACABLE_BUILD_DIR: '.esbuild-package-test',
        },
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    const template = JSON.parse(
      await readFile(join(dir, 'cloudformation-template-update-stack.json'), 'utf8'),
    );
    resources = template.Resources;
    artifacts = await readdir(dir);
  }, 240_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('bundles every function as an ESM artifact without the AWS SDK', () => {
    expect(artifacts.filter((f) => f.endsWith('.zip')).length).toBeGreaterThan(0);
    for (const [, fn] of ofType('AWS::Lambda::Function')) {
      expect(fn.Properties.Runtime).toBe('nodejs20.x');
      expect(fn.Properties.Handler).toMatch(/^functions\/[a-z-]+\.handler$/);
    }
  });

  it('creates every table of infra/ with its keys, stream and TTL', () => {
    for (const [name, def] of Object.entries(tables)) {
      const table = ofType('AWS::DynamoDB::Table').find(
        ([, r]) => r.Properties.TableName === tableName('lambdacable-ci', name as never),
      );
      expect(table, name).toBeDefined();
      const props = table![1].Properties;
      expect(props.KeySchema).toEqual(def.KeySchema);
      expect(props.BillingMode).toBe('PAY_PER_REQUEST');
      if (def.ttlAttribute) {
        expect(props.TimeToLiveSpecification).toEqual({
          AttributeName: def.ttlAttribute,
          Enabled: true,
        });
      }
      if (def.StreamSpecification)
        expect(props.StreamSpecification).toEqual(def.StreamSpecification);
    }
  });

  it('creates a FIFO queue with a FIFO DLQ redrive for every consumer group', () => {
    for (const group of consumerGroups) {
      const [, queue] = ofType('AWS::SQS::Queue').find(
        ([, r]) => r.Properties.QueueName === `lambdacable-ci-${group.name}.fifo`,
      )!;
      expect(queue.Properties.FifoQueue).toBe(true);
      expect(queue.Properties.RedrivePolicy.maxReceiveCount).toBe(group.maxReceiveCount);
      const dlqId = queue.Properties.RedrivePolicy.deadLetterTargetArn['Fn::GetAtt'][0];
      expect(resources[dlqId]!.Properties.FifoQueue).toBe(true);
    }
  });

  it('maps the outbox stream with partial batch responses, bounded retries and a failure destination', () => {
    const streams = ofType('AWS::Lambda::EventSourceMapping').filter(
      ([, r]) => r.Properties.StartingPosition,
    );
    expect(streams).toHaveLength(1);
    const props = streams[0]![1].Properties;
    expect(props.EventSourceArn).toEqual({ 'Fn::GetAtt': ['OutboxTable', 'StreamArn'] });
    expect(props.ParallelizationFactor).toBe(1);
    expect(props.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    expect(props.MaximumRetryAttempts).toBeGreaterThan(0);
    expect(props.MaximumRecordAgeInSeconds).toBeGreaterThan(0);
    expect(props.DestinationConfig.OnFailure.Destination).toEqual({
      'Fn::GetAtt': ['RelayFailuresQueue', 'Arn'],
    });
  });

  it('maps each consumer queue with partial batch responses', () => {
    const sqs = ofType('AWS::Lambda::EventSourceMapping').filter(
      ([, r]) => !r.Properties.StartingPosition,
    );
    expect(sqs.length).toBe(consumerGroups.length);
    for (const [, m] of sqs) {
      expect(m.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
      // AWS advises a visibility timeout of at least 6 × the function timeout.
      const queue = resources[m.Properties.EventSourceArn['Fn::GetAtt'][0]]!;
      const fn = resources[m.Properties.FunctionName['Fn::GetAtt'][0]]!;
      expect(queue.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * fn.Properties.Timeout);
    }
  });

  it('routes $connect, $disconnect and $default, and POST /_broadcast', () => {
    const routes = ofType('AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties.RouteKey);
    expect(routes).toEqual(
      expect.arrayContaining(['$connect', '$disconnect', '$default', 'POST /_broadcast']),
    );
  });

  it('gives every function its own role, with no wildcard resource for data-plane actions', () => {
    const roles = new Set<string>();
    for (const [name, fn] of ofType('AWS::Lambda::Function')) {
      const role = fn.Properties.Role['Fn::GetAtt']?.[0];
      expect(role, name).toBeDefined();
      expect(roles.has(role), `${name} shares ${role}`).toBe(false);
      roles.add(role);
      for (const policy of resources[role]!.Properties.Policies) {
        for (const statement of policy.PolicyDocument.Statement) {
          const list = [statement.Resource].flat();
          expect(list, `${role}: ${statement.Action}`).not.toContain('*');
        }
      }
    }
  });

  it('does not let Lambda retry the asynchronous welcome (it retries by itself)', () => {
    const configs = ofType('AWS::Lambda::EventInvokeConfig');
    const welcome = configs.find(([, r]) =>
      JSON.stringify(r.Properties.FunctionName).includes('WsWelcome'),
    );
    expect(welcome?.[1].Properties.MaximumRetryAttempts).toBe(0);
  });

  it('configures Powertools logging and metrics in every function', () => {
    for (const [, fn] of ofType('AWS::Lambda::Function')) {
      const vars = fn.Properties.Environment.Variables;
      expect(vars.POWERTOOLS_SERVICE_NAME).toBe('lambdacable');
      expect(vars.POWERTOOLS_METRICS_NAMESPACE).toBe('lambdacable');
      expect(vars.LAMBDACABLE_TABLE_OUTBOX).toBe('lambdacable-ci-outbox');
    }
  });
});
