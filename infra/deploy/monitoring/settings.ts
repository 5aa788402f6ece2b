/**
 * What the monitoring watches and when it alarms: the thresholds and their deploy variables,
 * the namespace of lambdacable's own metrics, and the functions whose errors are alarmed.
 */

import { ConfigError } from '../../../lib/kernel/errors';
import type { ConsumerGroupDefinition } from '../consumers';

/** The namespace and `service` dimension the functions' Powertools metrics are published under. */
export const METRICS_NAMESPACE = 'lambdacable';
export const METRICS_SERVICE = 'lambdacable';

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

/**
 * The built-in functions fed by the stream, the schedule or the client frames queue (consumer
 * groups' functions are fed by their queues): each gets an `Errors` alarm.
 */
export const EVENT_FED_FUNCTIONS = ['outboxRelay', 'pinger', 'wsDefault'] as const;

/**
 * The functions fed by a queue, the stream or the schedule: every group's, the relay, the
 * pinger, and wsDefault (the client frames queue's).
 */
export function erroringFunctions(groups: readonly ConsumerGroupDefinition[]): string[] {
  return [...groups.filter((g) => g.handler).map((g) => g.name), ...EVENT_FED_FUNCTIONS];
}
