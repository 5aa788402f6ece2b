import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALARM_TOPIC,
  DASHBOARD,
  DEFAULT_MONITORING,
  METRICS_NAMESPACE,
  METRICS_SERVICE,
  monitoringSettings,
} from '../../infra/deploy/monitoring/alarms';
import { queueNames, relayFailuresQueueName } from '../../infra/deploy/names';
import { cloudFormation } from '../../infra/deploy/template/cloudformation';
import { type PackagedService, packageService } from '../helpers/package';

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is untyped JSON.
type Resource = { Type: string; Properties: Record<string, any> };

const root = join(import.meta.dirname, '..', '..');

/** Every metric name the deployed code adds (`addMetric('<name>'`), read from its sources. */
function emittedMetrics(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) {
        for (const m of readFileSync(path, 'utf8').matchAll(/addMetric\(\s*'([A-Za-z]+)'/g)) {
          names.add(m[1]!);
        }
      }
    }
  };
  walk(join(root, 'functions'));
  walk(join(root, 'lib'));
  return names;
}

/** The function keys (`FooLambdaFunction` → `foo`) and their deployed names. */
function functionNames(resources: Record<string, Resource>): Map<string, string> {
  const out = new Map<string, string>();
  for (const [id, r] of Object.entries(resources)) {
    if (r.Type !== 'AWS::Lambda::Function') continue;
    out.set(r.Properties.FunctionName, id);
  }
  return out;
}

/** Function logical ids fed by a queue or a stream (event source mappings) or a schedule. */
function eventFedFunctions(resources: Record<string, Resource>): Set<string> {
  const fed = new Set<string>();
  for (const r of Object.values(resources)) {
    if (r.Type === 'AWS::Lambda::EventSourceMapping')
      fed.add(r.Properties.FunctionName['Fn::GetAtt'][0]);
    if (r.Type === 'AWS::Events::Rule') {
      for (const t of r.Properties.Targets) fed.add(t.Arn['Fn::GetAtt'][0]);
    }
  }
  return fed;
}

describe('alarms, their topic and the dashboard in the packaged template', () => {
  let packaged: PackagedService;
  let resources: Record<string, Resource>;
  const alarms = () =>
    Object.entries(resources).filter(([, r]) => r.Type === 'AWS::CloudWatch::Alarm') as [
      string,
      Resource,
    ][];
  const dimension = (alarm: Resource, name: string) =>
    alarm.Properties.Dimensions.find((d: { Name: string }) => d.Name === name)?.Value;

  beforeAll(async () => {
    packaged = await packageService('ci', { LAMBDACABLE_EXAMPLE_CONSUMER: 'true' });
    resources = packaged.template.Resources;
  }, 240_000);

  afterAll(async () => {
    await packaged?.remove();
  });

  it('alarms on the depth of every dead-letter queue and of the relay-failures queue', () => {
    const queues = Object.values(resources)
      .filter((r) => r.Type === 'AWS::SQS::Queue')
      .map((r) => r.Properties.QueueName as string);
    const deadLetters = queues.filter(
      (q) => q.endsWith('-dlq.fifo') || q.endsWith('-relay-failures'),
    );
    expect(deadLetters.sort()).toEqual(
      [
        queueNames('lambdacable-ci', 'broadcast').dlq,
        queueNames('lambdacable-ci', 'audit').dlq,
        queueNames('lambdacable-ci', 'frames').dlq,
        relayFailuresQueueName('lambdacable-ci'),
      ].sort(),
    );
    for (const queue of deadLetters) {
      const found = alarms().filter(
        ([, a]) =>
          a.Properties.Namespace === 'AWS/SQS' &&
          a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible' &&
          dimension(a, 'QueueName') === queue,
      );
      expect(found, queue).toHaveLength(1);
      expect(found[0]![1].Properties.Threshold).toBe(DEFAULT_MONITORING.deadLetterMessages);
      expect(found[0]![1].Properties.ComparisonOperator).toBe('GreaterThanOrEqualToThreshold');
    }
    // Every queue an alarm names exists in the template.
    for (const [id, a] of alarms()) {
      const queue = dimension(a, 'QueueName');
      if (queue !== undefined) expect(queues, id).toContain(queue);
    }
  });

  it("alarms on the outbox relay's IteratorAge", () => {
    const [, relay] = alarms().find(([, a]) => a.Properties.MetricName === 'IteratorAge')!;
    expect(relay.Properties.Namespace).toBe('AWS/Lambda');
    expect(dimension(relay, 'FunctionName')).toBe(
      resources.OutboxRelayLambdaFunction!.Properties.FunctionName,
    );
    expect(relay.Properties.Threshold).toBe(DEFAULT_MONITORING.iteratorAgeMs);
  });

  it('alarms on Errors of every function fed by a queue, the stream or the schedule, and names only real functions', () => {
    const names = functionNames(resources);
    const fed = eventFedFunctions(resources);
    expect([...fed].sort()).toEqual(
      [
        'AuditLambdaFunction',
        'BroadcastLambdaFunction',
        'OutboxRelayLambdaFunction',
        'PingerLambdaFunction',
        'WsDefaultLambdaFunction',
      ].sort(),
    );
    const errors = alarms().filter(([, a]) => a.Properties.MetricName === 'Errors');
    const alarmed = errors.map(([, a]) => names.get(dimension(a, 'FunctionName')));
    expect(alarmed.sort()).toEqual([...fed].sort());
    for (const [id, a] of alarms()) {
      const fn = dimension(a, 'FunctionName');
      if (fn !== undefined) expect(names.has(fn), `${id}: ${fn}`).toBe(true);
    }
  });

  it("alarms on lambdacable's own metrics, each one the code emits", () => {
    const emitted = emittedMetrics();
    const own = alarms().filter(([, a]) => a.Properties.Namespace === METRICS_NAMESPACE);
    expect(own.map(([, a]) => a.Properties.MetricName)).toEqual(
      expect.arrayContaining(['undeliveredFrames', 'failedMessages']),
    );
    for (const [id, a] of own) {
      expect(emitted, `${id} watches ${a.Properties.MetricName}`).toContain(
        a.Properties.MetricName,
      );
      // Powertools publishes every metric with the `service` dimension.
      expect(a.Properties.Dimensions).toEqual([{ Name: 'service', Value: METRICS_SERVICE }]);
    }
    const fn = resources.BroadcastLambdaFunction!.Properties.Environment.Variables;
    expect(fn.POWERTOOLS_METRICS_NAMESPACE).toBe(METRICS_NAMESPACE);
    expect(fn.POWERTOOLS_SERVICE_NAME).toBe(METRICS_SERVICE);
  });

  it("notifies the stack's SNS topic from every alarm, on alarm and on recovery", () => {
    expect(resources[ALARM_TOPIC]!.Type).toBe('AWS::SNS::Topic');
    // No address configured: no subscription.
    expect(Object.values(resources).some((r) => r.Type === 'AWS::SNS::Subscription')).toBe(false);
    expect(alarms().length).toBeGreaterThanOrEqual(10);
    for (const [id, a] of alarms()) {
      expect(a.Properties.AlarmActions, id).toEqual([{ Ref: ALARM_TOPIC }]);
      expect(a.Properties.OKActions, id).toEqual([{ Ref: ALARM_TOPIC }]);
      expect(a.Properties.TreatMissingData, id).toBe('notBreaching');
      expect(a.Properties.AlarmDescription, id).toContain(id);
    }
  });

  it('has a dashboard of the path whose every metric is a real resource or an emitted metric', () => {
    const body = resources[DASHBOARD]!.Properties.DashboardBody['Fn::Sub'] as string;
    // The only substitutions: the region and the WebSocket API's id.
    expect(new Set(body.match(/\$\{[^}]+\}/g))).toEqual(
      new Set([`\${AWS::Region}`, `\${WebsocketsApi}`]),
    );
    expect(resources.WebsocketsApi?.Type).toBe('AWS::ApiGatewayV2::Api');
    const dashboard = JSON.parse(body) as {
      widgets: { properties: { title: string; metrics: unknown[][] } }[];
    };
    const titles = dashboard.widgets.map((w) => w.properties.title).join(' | ');
    for (const topic of [
      'Outbox writes',
      'Relay lag',
      'Queue depth',
      'Queue age',
      'Broadcasts',
      'undelivered',
      'gone',
      'Connections',
      'errors',
      'throttles',
    ]) {
      expect(titles.toLowerCase()).toContain(topic.toLowerCase());
    }
    const emitted = emittedMetrics();
    const names = functionNames(resources);
    const queues = new Set(
      Object.values(resources)
        .filter((r) => r.Type === 'AWS::SQS::Queue')
        .map((r) => r.Properties.QueueName),
    );
    const tables = new Set(
      Object.values(resources)
        .filter((r) => r.Type === 'AWS::DynamoDB::Table')
        .map((r) => r.Properties.TableName),
    );
    for (const widget of dashboard.widgets) {
      for (const metric of widget.properties.metrics) {
        const [namespace, name, dimensionName, value] = metric as string[];
        const where = `${widget.properties.title}: ${namespace} ${name} ${value}`;
        if (namespace === METRICS_NAMESPACE) expect(emitted, where).toContain(name);
        if (dimensionName === 'QueueName') expect(queues.has(value), where).toBe(true);
        if (dimensionName === 'FunctionName') expect(names.has(value!), where).toBe(true);
        if (dimensionName === 'TableName') expect(tables.has(value), where).toBe(true);
      }
    }
  });
});

describe('alarm settings', () => {
  it('packages with an e-mail subscription and a threshold from their variables', async () => {
    const packaged = await packageService('ci', {
      LAMBDACABLE_ALARM_EMAIL: 'ops@example.com',
      LAMBDACABLE_ALARM_ITERATOR_AGE_MS: '30000',
    });
    try {
      const resources = packaged.template.Resources;
      const subscription = Object.values(resources).find(
        (r) => r.Type === 'AWS::SNS::Subscription',
      );
      expect(subscription?.Properties).toEqual({
        TopicArn: { Ref: ALARM_TOPIC },
        Protocol: 'email',
        Endpoint: 'ops@example.com',
      });
      const lag = Object.values(resources).find((r) => r.Properties?.MetricName === 'IteratorAge');
      expect(lag?.Properties.Threshold).toBe(30_000);
    } finally {
      await packaged.remove();
    }
  }, 240_000);

  it('sends every alarm to a topic given by ARN, and makes no topic of its own', () => {
    const topicArn = 'arn:aws:sns:eu-west-1:123456789012:ops';
    const { Resources, Outputs } = cloudFormation({
      prefix: 'lambdacable-ci',
      functionName: (key) => `lambdacable-ci-${key}`,
      monitoring: { ...DEFAULT_MONITORING, topicArn, email: 'ignored@example.com' },
    });
    expect(Resources[ALARM_TOPIC]).toBeUndefined();
    expect(Object.values(Resources).some((r) => r.Type.startsWith('AWS::SNS::'))).toBe(false);
    const alarms = Object.values(Resources).filter((r) => r.Type === 'AWS::CloudWatch::Alarm');
    expect(alarms.length).toBeGreaterThanOrEqual(10);
    for (const a of alarms) expect(a.Properties.AlarmActions).toEqual([topicArn]);
    expect(Outputs.AlarmTopicArn).toEqual({ Value: topicArn });
  });

  it('reads each threshold from its variable and refuses one that is not a positive number', () => {
    const topic = 'arn:aws:sns:eu-west-1:123456789012:ops';
    expect(
      monitoringSettings({
        LAMBDACABLE_ALARM_TOPIC_ARN: topic,
        LAMBDACABLE_ALARM_DLQ_MESSAGES: '5',
        LAMBDACABLE_ALARM_QUEUE_AGE: '',
      }),
    ).toEqual({ ...DEFAULT_MONITORING, topicArn: topic, deadLetterMessages: 5 });
    expect(() => monitoringSettings({ LAMBDACABLE_ALARM_FUNCTION_ERRORS: 'three' })).toThrow(
      'LAMBDACABLE_ALARM_FUNCTION_ERRORS: "three" is not a positive number',
    );
    expect(() => monitoringSettings({ LAMBDACABLE_ALARM_UNDELIVERED_FRAMES: '0' })).toThrow(
      /not a positive number/,
    );
  });
});
