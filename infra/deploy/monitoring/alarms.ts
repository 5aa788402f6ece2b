/**
 * What an operator watches: CloudWatch alarms on every place work can pile up (dead-letter
 * queues, the relay's failure queue, the stream relay's lag, failing functions, lambdacable's
 * own metrics), an SNS topic they notify, and a dashboard of the whole path. Built from the
 * same definitions as the rest of the template (`cloudFormation` merges it in).
 */

import type { ConsumerGroupDefinition } from '../consumers';
import {
  ALARM_TOPIC,
  alarmIds,
  DASHBOARD,
  errorsAlarmId,
  FRAMES,
  queueNames,
  RELAY_FAILURES_ALARM,
  RELAY_LAG_ALARM,
  RELAY_REFUSED_ALARM,
  relayFailuresQueueName,
  UNDELIVERED_FRAMES_ALARM,
} from '../names';
import type { Json, Resource } from '../template/types';
import { dashboardBody } from './dashboard';
import {
  erroringFunctions,
  METRICS_NAMESPACE,
  METRICS_SERVICE,
  type MonitoringSettings,
} from './settings';

export {
  ALARM_TOPIC,
  alarmIds,
  DASHBOARD,
  errorsAlarmId,
  RELAY_FAILURES_ALARM,
  RELAY_LAG_ALARM,
  RELAY_REFUSED_ALARM,
  UNDELIVERED_FRAMES_ALARM,
} from '../names';
// The settings and the alarms' logical ids, from here as before.
export {
  DEFAULT_MONITORING,
  EVENT_FED_FUNCTIONS,
  erroringFunctions,
  METRICS_NAMESPACE,
  METRICS_SERVICE,
  MONITORING_VARIABLES,
  type MonitoringSettings,
  monitoringSettings,
} from './settings';

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

  // The consumer groups' queues, and the client frames queue (a stuck frame holds up its
  // connection's later frames).
  for (const group of [...options.groups.map((g) => g.name), FRAMES]) {
    const names = queueNames(prefix, group);
    const ids = alarmIds(group);
    deadLetter(ids.deadLetters, names.dlq, `${group} messages dead-lettered`);
    alarm(ids.backlog, `${group} queue's oldest message is ${settings.queueAgeSeconds}+ s old`, {
      namespace: 'AWS/SQS',
      name: 'ApproximateAgeOfOldestMessage',
      dimensions: { QueueName: names.queue },
      statistic: 'Maximum',
      period: 60,
      periods: 3,
      threshold: settings.queueAgeSeconds,
    });
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
