import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerGroupsFor } from '../../infra/deploy/consumers';
import { tables } from '../../infra/deploy/definitions';
import { FRAMES_ROUTE, queueLogicalIds, tableName } from '../../infra/deploy/names';
import { type ArtifactSize, artifactSizes, BUNDLE_BUDGET_BYTES } from '../../infra/deploy/package';
import { DEFAULT_THROTTLES, throttleSettings } from '../../infra/deploy/throttling';
import { FRAMES_REQUEST_TEMPLATE } from '../../infra/deploy/websocket/frames-template';
import { type PackagedService, packagedFiles, packageService } from '../helpers/package';

/** The consumer groups of this environment (read once, as a deployment's start reads them). */
const consumerGroups = consumerGroupsFor(process.env);

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is untyped JSON.
type Resource = { Type: string; Properties: Record<string, any>; DependsOn?: unknown };
// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is untyped JSON.
type Json = any;

const FRAMES_QUEUE = queueLogicalIds('frames').queue;

/** The functions that read each secret; no other function gets its parameter or may read it. */
const SECRETS: Record<string, string[]> = {
  LAMBDACABLE_JWT_SECRET: ['WsConnectLambdaFunction'],
  // $connect authorizes a restored session's signed streams again.
  LAMBDACABLE_STREAMS_SECRET: ['WsConnectLambdaFunction', 'WsDefaultLambdaFunction'],
  LAMBDACABLE_BROADCAST_KEY: ['HttpBroadcastLambdaFunction'],
  // During a rotation, the previous key goes to the same functions only.
  LAMBDACABLE_JWT_SECRET_PREVIOUS: ['WsConnectLambdaFunction'],
  LAMBDACABLE_STREAMS_SECRET_PREVIOUS: ['WsConnectLambdaFunction', 'WsDefaultLambdaFunction'],
  LAMBDACABLE_BROADCAST_KEY_PREVIOUS: ['HttpBroadcastLambdaFunction'],
};

/** A secret's value in the packaging environment: none may reach the package. */
const secretValue = (name: string) => `${name.toLowerCase()}-value-0123456789abcdef0123456789`;

describe('serverless package (osls + serverless-esbuild)', () => {
  let packaged: PackagedService;
  let resources: Record<string, Resource>;
  let sizes: ArtifactSize[];
  const ofType = (type: string) =>
    Object.entries(resources).filter(([, r]) => r.Type === type) as [string, Resource][];

  beforeAll(async () => {
    packaged = await packageService(
      'ci',
      Object.fromEntries(Object.keys(SECRETS).map((name) => [name, secretValue(name)])),
    );
    resources = packaged.template.Resources;
    sizes = await artifactSizes(packaged.dir);
  }, 240_000);

  afterAll(async () => {
    await packaged?.remove();
  });

  it('runs every function on nodejs24.x (Node.js 20 functions can no longer be created)', () => {
    const functions = ofType('AWS::Lambda::Function');
    expect(functions.length).toBe(8);
    for (const [, fn] of functions) {
      expect(fn.Properties.Runtime).toBe('nodejs24.x');
      expect(fn.Properties.Handler).toMatch(/^functions\/[a-z-]+\.handler$/);
    }
  });

  it('ships one minified ESM bundle per function, without source maps, within the size budget', () => {
    expect(sizes.map((s) => s.function).sort()).toEqual(
      ofType('AWS::Lambda::Function')
        .map(([id]) => id.replace(/LambdaFunction$/, ''))
        .map((id) => id[0]!.toLowerCase() + id.slice(1))
        .sort(),
    );
    for (const size of sizes) {
      // The handler's own file, nothing else: no source map, no other function.
      expect(size.files, size.function).toHaveLength(1);
      expect(size.files[0], size.function).toMatch(/^functions\/[a-z-]+\.mjs$/);
      expect(size.unzippedBytes, size.function).toBeLessThanOrEqual(BUNDLE_BUDGET_BYTES);
    }
    for (const [, fn] of ofType('AWS::Lambda::Function')) {
      const zip = fn.Properties.Code.S3Key as string;
      expect(zip).toMatch(/\.zip$/);
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS).toBeUndefined();
    }
  });

  it('gives each function the parameter names of only the secrets it reads, and lets it read exactly those', () => {
    const functions = ofType('AWS::Lambda::Function');
    const ssmGrants = (fn: Resource) =>
      resources[fn.Properties.Role['Fn::GetAtt'][0]]!.Properties.Policies.flatMap(
        // biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
        (p: any) => p.PolicyDocument.Statement,
      )
        // biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
        .filter((s: any) => JSON.stringify(s.Action).includes('ssm:'))
        // biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
        .flatMap((s: any) => {
          expect(s.Action).toEqual(['ssm:GetParameter']);
          // biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
          return s.Resource.map((r: any) => r['Fn::Sub'] as string);
        })
        .sort();
    for (const [id, fn] of functions) {
      const variables = fn.Properties.Environment.Variables;
      const reads = Object.keys(SECRETS).filter((name) => SECRETS[name]!.includes(id));
      for (const name of Object.keys(SECRETS)) {
        // The value is never deployed; the parameter's name only to the functions that read it.
        expect(variables, `${id} ${name}`).not.toHaveProperty(name);
        if (reads.includes(name)) {
          const parameter = `/lambdacable/ci/${name
            .replace(/^LAMBDACABLE_/, '')
            .toLowerCase()
            .replace(/_/g, '-')}`;
          expect(variables[`${name}_PARAM`], id).toBe(parameter);
        } else {
          expect(variables, `${id} ${name}_PARAM`).not.toHaveProperty(`${name}_PARAM`);
        }
      }
      expect(ssmGrants(fn), id).toEqual(
        reads
          .map(
            (name) =>
              `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter${variables[`${name}_PARAM`]}`,
          )
          .sort(),
      );
    }
  });

  it('puts no secret value in any file of the package: templates, state, function bundles', async () => {
    const files = await packagedFiles(packaged.dir);
    expect(files.map((f) => f.path)).toEqual(
      expect.arrayContaining([
        'cloudformation-template-create-stack.json',
        'cloudformation-template-update-stack.json',
        'serverless-state.json',
        expect.stringMatching(/^wsConnect\.zip!functions\/ws-connect\.mjs$/),
      ]),
    );
    const found = files.flatMap((f) =>
      Object.keys(SECRETS)
        .filter((name) => f.content.includes(secretValue(name)))
        .map((name) => `${f.path}: ${name}`),
    );
    expect(found).toEqual([]);
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

  it('keeps the tables whose data cannot be rebuilt: Retain, deletion protection, point-in-time recovery', () => {
    const byName = (name: string) =>
      ofType('AWS::DynamoDB::Table').find(
        ([, r]) => r.Properties.TableName === tableName('lambdacable-ci', name as never),
      )![1] as Resource & { DeletionPolicy?: string; UpdateReplacePolicy?: string };
    for (const name of ['outbox', 'acks', 'schemas']) {
      const table = byName(name);
      expect(table.DeletionPolicy, name).toBe('Retain');
      expect(table.UpdateReplacePolicy, name).toBe('Retain');
      expect(table.Properties.DeletionProtectionEnabled, name).toBe(true);
      expect(table.Properties.PointInTimeRecoverySpecification, name).toEqual({
        PointInTimeRecoveryEnabled: true,
      });
    }
    // Minutes of state that reconnecting clients rebuild: deleted with the stack.
    for (const name of ['history', 'sessions', 'connections']) {
      const table = byName(name);
      expect(table.DeletionPolicy, name).toBeUndefined();
      expect(table.Properties.DeletionProtectionEnabled, name).toBeUndefined();
    }
  });

  it('expires ack items and stream meta items: the acks and history tables have TTL on expiresAt, and every function gets their variables', () => {
    for (const name of ['acks', 'history'] as const) {
      const [, table] = ofType('AWS::DynamoDB::Table').find(
        ([, r]) => r.Properties.TableName === tableName('lambdacable-ci', name),
      )!;
      expect(table.Properties.TimeToLiveSpecification, name).toEqual({
        AttributeName: 'expiresAt',
        Enabled: true,
      });
    }
    for (const [id, fn] of ofType('AWS::Lambda::Function')) {
      const variables = fn.Properties.Environment.Variables;
      expect(variables, id).toHaveProperty('LAMBDACABLE_ACK_TTL');
      expect(variables, id).toHaveProperty('LAMBDACABLE_STREAM_META_TTL');
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
    // Each consumer group's, and wsDefault's on the client frames queue.
    expect(sqs.length).toBe(consumerGroups.length + 1);
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

  it('sends every $default frame to the frames FIFO queue grouped by connection, and deploys that route with the stage', () => {
    const [, route] = ofType('AWS::ApiGatewayV2::Route').find(
      ([, r]) => r.Properties.RouteKey === '$default',
    )!;
    const integrationId = route.Properties.Target['Fn::Join'][1][1].Ref;
    const integration = resources[integrationId]!.Properties;
    expect(integration.IntegrationType).toBe('AWS');
    expect(integration.RequestTemplates).toEqual({ $default: FRAMES_REQUEST_TEMPLATE });
    expect(integration.IntegrationUri['Fn::Sub'][1].Queue).toEqual({
      'Fn::GetAtt': [FRAMES_QUEUE, 'QueueName'],
    });
    // API Gateway may send to that queue and nothing else.
    const sender = resources[integration.CredentialsArn['Fn::GetAtt'][0]]!.Properties;
    expect(sender.Policies.flatMap((p: Json) => p.PolicyDocument.Statement)).toEqual([
      {
        Effect: 'Allow',
        Action: ['sqs:SendMessage'],
        Resource: [{ 'Fn::GetAtt': [FRAMES_QUEUE, 'Arn'] }],
      },
    ]);
    const queue = resources[FRAMES_QUEUE]!.Properties;
    expect(queue).toMatchObject({ FifoQueue: true, FifoThroughputLimit: 'perMessageGroupId' });
    // wsDefault consumes it; no Lambda integration of $default is left.
    const mapping = ofType('AWS::Lambda::EventSourceMapping').find(
      ([, r]) => r.Properties.EventSourceArn['Fn::GetAtt']?.[0] === FRAMES_QUEUE,
    )!;
    expect(mapping[1].Properties.FunctionName['Fn::GetAtt'][0]).toBe('WsDefaultLambdaFunction');
    expect(resources.WsDefaultWebsocketsIntegration).toBeUndefined();
    // The stage's deployment waits for the route, and its id changes with the route.
    const stage = resources.WebsocketsDeploymentStage!.Properties;
    const deployment = resources[stage.DeploymentId.Ref]!;
    expect(route).toBe(resources[FRAMES_ROUTE]);
    expect(deployment.DependsOn).toContain(FRAMES_ROUTE);
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
          // ListStreams has no resource type: IAM grants it on "*" only (template-spec checks).
          if (JSON.stringify(statement.Action) === '["dynamodb:ListStreams"]') continue;
          expect(list, `${role}: ${statement.Action}`).not.toContain('*');
        }
      }
    }
  });

  it('throttles $connect, $default and POST /_broadcast at their stages, by default', () => {
    expect(resources.WebsocketsDeploymentStage!.Properties.RouteSettings).toEqual({
      $connect: {
        ThrottlingRateLimit: DEFAULT_THROTTLES.connect.rate,
        ThrottlingBurstLimit: DEFAULT_THROTTLES.connect.burst,
      },
      $default: {
        ThrottlingRateLimit: DEFAULT_THROTTLES.frames.rate,
        ThrottlingBurstLimit: DEFAULT_THROTTLES.frames.burst,
      },
    });
    // The HTTP API's one route is POST /_broadcast.
    expect(
      ofType('AWS::ApiGatewayV2::Route')
        .map(([, r]) => r.Properties.RouteKey)
        .filter((k: string) => !k.startsWith('$')),
    ).toEqual(['POST /_broadcast']);
    expect(resources.HttpApiStage!.Properties.DefaultRouteSettings).toEqual({
      DetailedMetricsEnabled: false,
      ThrottlingRateLimit: DEFAULT_THROTTLES.broadcast.rate,
      ThrottlingBurstLimit: DEFAULT_THROTTLES.broadcast.burst,
    });
  });

  it('gives the functions the public prefix public: and the default cap when none is set', () => {
    for (const fn of ['WsConnectLambdaFunction', 'WsDefaultLambdaFunction']) {
      const env = resources[fn]!.Properties.Environment.Variables;
      expect(env.LAMBDACABLE_PUBLIC_STREAM_PREFIX).toBe('public:');
      expect(env.LAMBDACABLE_MAX_SUBSCRIPTIONS).toBe('');
    }
  });

  it("grants ManageConnections on its own stage's connections only", () => {
    const grants = Object.values(resources)
      .filter((r) => r.Type === 'AWS::IAM::Role')
      .flatMap((r) => r.Properties.Policies)
      .flatMap(
        (p: { PolicyDocument: { Statement: { Action: string[]; Resource: unknown[] }[] } }) =>
          p.PolicyDocument.Statement,
      )
      .filter((st) => st.Action.includes('execute-api:ManageConnections'));
    expect(grants.length).toBeGreaterThanOrEqual(4);
    for (const grant of grants) {
      expect(grant.Resource).toEqual([
        {
          'Fn::Sub':
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string.
            'arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${WebsocketsApi}/ci/*/@connections/*',
        },
      ]);
    }
  });

  it('does not let Lambda retry a pinger run (a retry would only overlap the next scheduled run)', () => {
    const configs = ofType('AWS::Lambda::EventInvokeConfig');
    const pinger = configs.find(([, r]) =>
      JSON.stringify(r.Properties.FunctionName).includes('Pinger'),
    );
    expect(pinger?.[1].Properties.MaximumRetryAttempts).toBe(0);
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

describe('a consumer group of your own, declared in infra/deploy/consumers.ts (the example `audit`)', () => {
  let packaged: PackagedService;
  let resources: Record<string, Resource>;

  beforeAll(async () => {
    packaged = await packageService('ci', { LAMBDACABLE_EXAMPLE_CONSUMER: 'true' });
    resources = packaged.template.Resources;
  }, 240_000);

  afterAll(async () => {
    await packaged?.remove();
  });

  const statements = (role: string): { Action: string[]; Resource: unknown }[] =>
    resources[role]!.Properties.Policies.flatMap(
      (p: { PolicyDocument: { Statement: unknown[] } }) => p.PolicyDocument.Statement,
    );

  it('gets its function, fed by its own FIFO queue with a DLQ, with partial batch responses', () => {
    const fn = resources.AuditLambdaFunction!;
    expect(fn.Properties.Handler).toBe('functions/consumers/audit.handler');
    expect(fn.Properties.Timeout).toBe(10);
    expect(fn.Properties.Role).toEqual({ 'Fn::GetAtt': ['AuditRole', 'Arn'] });
    expect(fn.Properties.Environment.Variables.LAMBDACABLE_QUEUE_AUDIT).toEqual({
      Ref: 'AuditQueue',
    });
    const [, mapping] = Object.entries(resources).find(
      ([, r]) =>
        r.Type === 'AWS::Lambda::EventSourceMapping' &&
        JSON.stringify(r.Properties.EventSourceArn).includes('AuditQueue'),
    )!;
    expect(mapping.Properties.FunctionName).toEqual({
      'Fn::GetAtt': ['AuditLambdaFunction', 'Arn'],
    });
    expect(mapping.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    const queue = resources.AuditQueue!.Properties;
    expect(queue.QueueName).toBe('lambdacable-ci-audit.fifo');
    // The default visibility: 6 × the function's timeout.
    expect(queue.VisibilityTimeout).toBe(60);
    // The default: 10 deliveries, 486 s of back-off before the DLQ (DEFAULT_RETRY_SCHEDULE).
    expect(queue.RedrivePolicy).toEqual({
      deadLetterTargetArn: { 'Fn::GetAtt': ['AuditDlq', 'Arn'] },
      maxReceiveCount: 10,
    });
  });

  it('routes the group topics to its queue, and gives its role its queue, the schemas and its ack items only', () => {
    const relay = statements('OutboxRelayRole').find((s) => s.Action.includes('sqs:SendMessage'));
    expect(relay?.Resource).toContainEqual({ 'Fn::GetAtt': ['AuditQueue', 'Arn'] });
    const audit = statements('AuditRole');
    const on = (resource: unknown) =>
      audit
        .filter((s) => JSON.stringify(s.Resource).includes(JSON.stringify(resource)))
        .flatMap((s) => s.Action)
        .sort();
    expect(on({ 'Fn::GetAtt': ['AcksTable', 'Arn'] })).toEqual([
      'dynamodb:GetItem',
      'dynamodb:UpdateItem',
    ]);
    expect(on({ 'Fn::GetAtt': ['SchemasTable', 'Arn'] })).toEqual(['dynamodb:GetItem']);
    expect(on({ 'Fn::GetAtt': ['AuditQueue', 'Arn'] })).toContain('sqs:ReceiveMessage');
    expect(on({ 'Fn::GetAtt': ['BroadcastQueue', 'Arn'] })).toEqual([]);
    const tablesReached = audit.flatMap(
      (s) => JSON.stringify(s.Resource).match(/[A-Za-z]+Table/g) ?? [],
    );
    expect(new Set(tablesReached)).toEqual(new Set(['AcksTable', 'SchemasTable']));
    // The broadcast consumer keeps no ack state: no grant on the acks table.
    expect(JSON.stringify(statements('BroadcastRole'))).not.toContain('AcksTable');
  });
});

describe('stage throttling settings (infra/deploy/throttling.ts)', () => {
  it('reads each limit from its variable and refuses one that is not a positive integer', () => {
    expect(
      throttleSettings({ LAMBDACABLE_CONNECT_RATE_LIMIT: '50', LAMBDACABLE_FRAME_BURST_LIMIT: '' }),
    ).toEqual({
      ...DEFAULT_THROTTLES,
      connect: { rate: 50, burst: DEFAULT_THROTTLES.connect.burst },
    });
    expect(() => throttleSettings({ LAMBDACABLE_BROADCAST_BURST_LIMIT: '1.5' })).toThrow(
      'LAMBDACABLE_BROADCAST_BURST_LIMIT: "1.5" is not a positive integer',
    );
  });

  it('packages the limits it is given, and an empty public prefix as empty (any name public)', async () => {
    const packaged = await packageService('ci', {
      LAMBDACABLE_CONNECT_RATE_LIMIT: '20',
      LAMBDACABLE_BROADCAST_BURST_LIMIT: '7',
      LAMBDACABLE_PUBLIC_STREAM_PREFIX: '',
      LAMBDACABLE_MAX_SUBSCRIPTIONS: '16',
      LAMBDACABLE_SECRETS_MAX_AGE: '60',
    });
    try {
      const r = packaged.template.Resources;
      const env = r.WsDefaultLambdaFunction!.Properties.Environment.Variables;
      expect(env.LAMBDACABLE_PUBLIC_STREAM_PREFIX).toBe('');
      expect(env.LAMBDACABLE_MAX_SUBSCRIPTIONS).toBe('16');
      expect(env.LAMBDACABLE_SECRETS_MAX_AGE).toBe('60');
      expect(
        r.WebsocketsDeploymentStage!.Properties.RouteSettings.$connect.ThrottlingRateLimit,
      ).toBe(20);
      expect(r.HttpApiStage!.Properties.DefaultRouteSettings.ThrottlingBurstLimit).toBe(7);
    } finally {
      await packaged.remove();
    }
  }, 240_000);
});
