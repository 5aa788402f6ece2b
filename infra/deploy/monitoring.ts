/**
 * What an operator watches: CloudWatch alarms on every place work can pile up (dead-letter
 * queues, the relay's failure queue, the stream relay's lag, failing functions, lambdacable's
 * own metrics), an SNS topic they notify, and a dashboard of the whole path. Built from the
 * same definitions as the rest of the template (`cloudFormation` merges it in).
 */

import { ConfigError } from '../../lib/kernel/errors';
import type { ConsumerGroupDefinition } from './consumers';
import { pascal, queueNames, relayFailuresQueueName, tableName } from './definitions';

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type Resource = { Type: string; Properties: Record<string, Json>; Condition?: string };

/** The namespace and `service` dimension the functions' Powertools metrics are published under. */
export const METRICS_NAMESPACE = 'lambdacable';
export const METRICS_SERVICE = 'lambdacable';

/** The WebSocket API's logical id, as the Serverless Framework names it. */
const WEBSOCKET_API = 'WebsocketsApi';

/**
 * Thresholds and where alarms go. Each has a deploy variable (docs/configuration.md, "Alarm settings");
 * the defaults page on trouble that lasts, not on one slow request.
 */
export interface MonitoringSettings {
  /** An SNS topic to notify instead of the stack's own `<prefix>-alarms`. */
  readonly topicArn?: string;
  /** An address subscribed to the stack's topic (it must confirm the subscription). */
  readonly email?: string;
  /** Visible messages in a dead-letter queue or the relay-failures queue. @default 1 */
  readonly deadLetterMessages: number;
  /** Age of the oldest message of a consumer group's queue, in seconds. @default 900 */
  readonly queueAgeSeconds: number;
  /** The stream relay's `IteratorAge` (ms), held for 3 minutes. @default 120000 */
  readonly iteratorAgeMs: number;
  /** `Errors` of a function fed by a queue, the stream or the schedule, in 5 minutes. @default 3 */
  readonly functionErrors: number;
  /** `undeliveredFrames` in 5 minutes. @default 1 */
  readonly undeliveredFrames: number;
  /** `failedMessages` (nacked or failed messages of the consumers) in 5 minutes. @default 10 */
  readonly failedMessages: number;
}

/** The defaults of {@link MonitoringSettings}. */
export const DEFAULT_MONITORING: MonitoringSettings = {
  deadLetterMessages: 1,
  queueAgeSeconds: 900,
  iteratorAgeMs: 120_000,
  functionErrors: 3,
  undeliveredFrames: 1,
  failedMessages: 10,
};

/** The deploy variables of {@link MonitoringSettings}, by setting. */
export const MONITORING_VARIABLES = {
  topicArn: 'LAMBDACABLE_ALARM_TOPIC_ARN',
  email: 'LAMBDACABLE_ALARM_EMAIL',
  deadLetterMessages: 'LAMBDACABLE_ALARM_DLQ_MESSAGES',
  queueAgeSeconds: 'LAMBDACABLE_ALARM_QUEUE_AGE',
  iteratorAgeMs: 'LAMBDACABLE_ALARM_ITERATOR_AGE_MS',
  functionErrors: 'LAMBDACABLE_ALARM_FUNCTION_ERRORS',
  undeliveredFrames: 'LAMBDACABLE_ALARM_UNDELIVERED_FRAMES',
  failedMessages: 'LAMBDACABLE_ALARM_FAILED_MESSAGES',
} as const satisfies Record<keyof MonitoringSettings, string>;

/**
 * Settings from deploy variables (`serverless.yml` passes them; empty means the default).
 * Throws on a threshold that is not a positive number, so a typo fails the deploy.
 */
export function monitoringSettings(
  env: Readonly<Record<string, string | undefined>>,
): MonitoringSettings {
  const number = (key: keyof typeof DEFAULT_MONITORING & keyof MonitoringSettings): number => {
    const name = MONITORING_VARIABLES[key];
    const raw = env[name];
    if (raw === undefined || raw === '') return DEFAULT_MONITORING[key] as number;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) {
      throw new ConfigError(`${name}: ${JSON.stringify(raw)} is not a positive number`, {
        variable: name,
      });
    }
    return value;
  };
  const topicArn = env[MONITORING_VARIABLES.topicArn] || undefined;
  const email = env[MONITORING_VARIABLES.email] || undefined;
  return {
    ...(topicArn ? { topicArn } : {}),
    ...(email ? { email } : {}),
    deadLetterMessages: number('deadLetterMessages'),
    queueAgeSeconds: number('queueAgeSeconds'),
    iteratorAgeMs: number('iteratorAgeMs'),
    functionErrors: number('functionErrors'),
    undeliveredFrames: number('undeliveredFrames'),
    failedMessages: number('failedMessages'),
  };
}

/** Logical ids of the alarms `npm start` also prints (infra/local/local-alarms.ts). */
export const RELAY_FAILURES_ALARM = 'RelayFailuresAlarm';
export const RELAY_LAG_ALARM = 'RelayLagAlarm';
export const UNDELIVERED_FRAMES_ALARM = 'UndeliveredFramesAlarm';
export const RELAY_REFUSED_ALARM = 'RelayRefusedAlarm';

/** The alarm topic's logical id (when the stack makes its own). */
export const ALARM_TOPIC = 'AlarmTopic';

/** The dashboard's logical id. */
export const DASHBOARD = 'Dashboard';

/**
 * The built-in functions fed by the stream or the schedule (consumer groups' functions are
 * fed by their queues): each gets an `Errors` alarm.
 */
export const EVENT_FED_FUNCTIONS = ['outboxRelay', 'pinger'] as const;

/**
 * lambdacable's own metrics that alarms watch, with their setting. The deploy test checks
 * that the code emits every metric an alarm or the dashboard names.
 */
const METRIC_ALARMS = [
  {
    id: UNDELIVERED_FRAMES_ALARM,
    metric: 'undeliveredFrames',
    setting: 'undeliveredFrames',
    what: 'frames the fan-out gave up on (a connection that stayed throttled or failing)',
  },
  {
    id: 'FailedMessagesAlarm',
    metric: 'failedMessages',
    setting: 'failedMessages',
    what: 'consumer messages that failed and will be retried (then dead-lettered)',
  },
] as const;

/** Options of {@link monitoring}. */
export interface MonitoringOptions {
  readonly prefix: string;
  readonly functionName: (key: string) => string;
  readonly groups: readonly ConsumerGroupDefinition[];
  readonly settings: MonitoringSettings;
  /** The refused-records metric of the relay (alarmed at 1). */
  readonly relayRefusedMetric?: string;
}

/** The alarms, the topic (and its e-mail subscription) and the dashboard. */
export function monitoring(options: MonitoringOptions): {
  Resources: Record<string, Resource>;
  Outputs: Record<string, Json>;
} {
  const { prefix, settings } = options;
  const Resources: Record<string, Resource> = {};
  const Outputs: Record<string, Json> = {};
  const topic: Json = settings.topicArn ?? { Ref: ALARM_TOPIC };
  if (!settings.topicArn) {
    Resources[ALARM_TOPIC] = {
      Type: 'AWS::SNS::Topic',
      Properties: { TopicName: `${prefix}-alarms`, DisplayName: `${prefix} alarms` },
    };
    if (settings.email) {
      Resources.AlarmEmailSubscription = {
        Type: 'AWS::SNS::Subscription',
        Properties: { TopicArn: { Ref: ALARM_TOPIC }, Protocol: 'email', Endpoint: settings.email },
      };
    }
  }
  Outputs.AlarmTopicArn = { Value: topic };

  const alarm = (
    id: string,
    description: string,
    metric: {
      namespace: string;
      name: string;
      dimensions: Record<string, Json>;
      statistic: 'Sum' | 'Maximum';
      period: number;
      periods: number;
      threshold: number;
    },
  ): void => {
    Resources[id] = {
      Type: 'AWS::CloudWatch::Alarm',
      Properties: {
        AlarmName: `${prefix}-${id.replace(/Alarm$/, '')}`,
        AlarmDescription: `${description} (docs/operations.md: ${id})`,
        Namespace: metric.namespace,
        MetricName: metric.name,
        Dimensions: Object.entries(metric.dimensions).map(([Name, Value]) => ({ Name, Value })),
        Statistic: metric.statistic,
        Period: metric.period,
        EvaluationPeriods: metric.periods,
        DatapointsToAlarm: metric.periods,
        Threshold: metric.threshold,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
        AlarmActions: [topic],
        OKActions: [topic],
      },
    };
  };

  const deadLetter = (id: string, queueName: string, what: string) =>
    alarm(id, `${what}: ${settings.deadLetterMessages}+ message(s) in ${queueName}`, {
      namespace: 'AWS/SQS',
      name: 'ApproximateNumberOfMessagesVisible',
      dimensions: { QueueName: queueName },
      statistic: 'Maximum',
      period: 60,
      periods: 1,
      threshold: settings.deadLetterMessages,
    });

  for (const group of options.groups) {
    const names = queueNames(prefix, group.name);
    const ids = alarmIds(group.name);
    deadLetter(ids.deadLetters, names.dlq, `${group.name} messages dead-lettered`);
    alarm(
      ids.backlog,
      `${group.name} queue's oldest message is ${settings.queueAgeSeconds}+ s old`,
      {
        namespace: 'AWS/SQS',
        name: 'ApproximateAgeOfOldestMessage',
        dimensions: { QueueName: names.queue },
        statistic: 'Maximum',
        period: 60,
        periods: 3,
        threshold: settings.queueAgeSeconds,
      },
    );
  }
  deadLetter(
    RELAY_FAILURES_ALARM,
    relayFailuresQueueName(prefix),
    'the stream relay gave a batch up (committed events not relayed; npm run relay:replay)',
  );
  alarm(RELAY_LAG_ALARM, `the stream relay is ${settings.iteratorAgeMs}+ ms behind`, {
    namespace: 'AWS/Lambda',
    name: 'IteratorAge',
    dimensions: { FunctionName: options.functionName('outboxRelay') },
    statistic: 'Maximum',
    period: 60,
    periods: 3,
    threshold: settings.iteratorAgeMs,
  });
  for (const key of erroringFunctions(options.groups)) {
    alarm(errorsAlarmId(key), `${key} failed ${settings.functionErrors}+ times in 5 minutes`, {
      namespace: 'AWS/Lambda',
      name: 'Errors',
      dimensions: { FunctionName: options.functionName(key) },
      statistic: 'Sum',
      period: 300,
      periods: 1,
      threshold: settings.functionErrors,
    });
  }
  const own = (id: string, metric: string, threshold: number, what: string) =>
    alarm(id, `${threshold}+ ${what} in 5 minutes`, {
      namespace: METRICS_NAMESPACE,
      name: metric,
      dimensions: { service: METRICS_SERVICE },
      statistic: 'Sum',
      period: 300,
      periods: 1,
      threshold,
    });
  for (const a of METRIC_ALARMS) own(a.id, a.metric, settings[a.setting], a.what);
  if (options.relayRefusedMetric) {
    own(
      RELAY_REFUSED_ALARM,
      options.relayRefusedMetric,
      1,
      'outbox records the relay cannot send (retried, then in relay-failures)',
    );
  }

  Resources[DASHBOARD] = {
    Type: 'AWS::CloudWatch::Dashboard',
    Properties: {
      DashboardName: prefix,
      DashboardBody: { 'Fn::Sub': JSON.stringify(dashboardBody(options)) },
    },
  };
  Outputs.DashboardName = { Value: { Ref: DASHBOARD } };
  return { Resources, Outputs };
}

/** Logical ids of a consumer group's alarms. */
export function alarmIds(group: string): { deadLetters: string; backlog: string } {
  const name = pascal(group);
  return { deadLetters: `${name}DlqAlarm`, backlog: `${name}QueueAgeAlarm` };
}

/** Logical id of a function's `Errors` alarm. */
export function errorsAlarmId(functionKey: string): string {
  return `${pascal(functionKey)}ErrorsAlarm`;
}

/** The functions fed by a queue, the stream or the schedule: every group's, the relay, the pinger. */
export function erroringFunctions(groups: readonly ConsumerGroupDefinition[]): string[] {
  return [...groups.filter((g) => g.handler).map((g) => g.name), ...EVENT_FED_FUNCTIONS];
}

type Metric = (string | { stat?: string; label?: string; yAxis?: string })[];

/** The dashboard: one row per stage of the path, in the order an event travels it. */
function dashboardBody(options: MonitoringOptions): Json {
  const { prefix } = options;
  const fn = (key: string) => options.functionName(key);
  const own = (name: string, label = name): Metric => [
    METRICS_NAMESPACE,
    name,
    'service',
    METRICS_SERVICE,
    { stat: 'Sum', label },
  ];
  const queues = options.groups.map((g) => queueNames(prefix, g.name));
  const lambdaAll = (metric: string): Metric[] =>
    [...erroringFunctions(options.groups), 'deliver', 'wsConnect', 'wsDefault', 'httpBroadcast']
      .filter((k, i, all) => all.indexOf(k) === i)
      .map((k) => ['AWS/Lambda', metric, 'FunctionName', fn(k), { stat: 'Sum', label: k }]);
  const widget = (
    title: string,
    metrics: Metric[],
    x: number,
    y: number,
    stat: 'Sum' | 'Maximum' = 'Sum',
  ): Json => ({
    type: 'metric',
    x,
    y,
    width: 8,
    height: 6,
    properties: {
      title,
      region: `\${AWS::Region}`,
      view: 'timeSeries',
      stacked: false,
      stat,
      period: 60,
      metrics: metrics as Json,
    },
  });
  const outboxTable = tableName(prefix, 'outbox');
  return {
    widgets: [
      widget(
        'Outbox writes and relay',
        [
          ['AWS/DynamoDB', 'ConsumedWriteCapacityUnits', 'TableName', outboxTable, { stat: 'Sum' }],
          own('relayedMessages'),
          ...(options.relayRefusedMetric ? [own(options.relayRefusedMetric)] : []),
          own('relayRetries'),
        ],
        0,
        0,
      ),
      widget(
        'Relay lag (IteratorAge, ms)',
        [['AWS/Lambda', 'IteratorAge', 'FunctionName', fn('outboxRelay'), { stat: 'Maximum' }]],
        8,
        0,
        'Maximum',
      ),
      widget(
        'Queue depth (visible messages)',
        [
          ...queues.flatMap((q) => [
            ['AWS/SQS', 'ApproximateNumberOfMessagesVisible', 'QueueName', q.queue] as Metric,
            ['AWS/SQS', 'ApproximateNumberOfMessagesVisible', 'QueueName', q.dlq] as Metric,
          ]),
          [
            'AWS/SQS',
            'ApproximateNumberOfMessagesVisible',
            'QueueName',
            relayFailuresQueueName(prefix),
          ],
        ],
        16,
        0,
        'Maximum',
      ),
      widget(
        'Queue age (oldest message, s)',
        queues.map((q) => ['AWS/SQS', 'ApproximateAgeOfOldestMessage', 'QueueName', q.queue]),
        0,
        6,
        'Maximum',
      ),
      widget('Broadcasts and consumers', [own('consumedMessages'), own('failedMessages')], 8, 6),
      widget(
        'Frames: delivered, gone, undelivered',
        [
          own('deliveredFrames'),
          own('goneConnections'),
          own('undeliveredFrames'),
          own('retriedPosts'),
          own('redeliveredFrames'),
        ],
        16,
        6,
      ),
      widget(
        'Connections (WebSocket API)',
        [
          ['AWS/ApiGateway', 'ConnectCount', 'ApiId', `\${${WEBSOCKET_API}}`, { stat: 'Sum' }],
          ['AWS/ApiGateway', 'MessageCount', 'ApiId', `\${${WEBSOCKET_API}}`, { stat: 'Sum' }],
        ],
        0,
        12,
      ),
      widget('Function errors', lambdaAll('Errors'), 8, 12),
      widget('Function throttles', lambdaAll('Throttles'), 16, 12),
    ],
  };
}
