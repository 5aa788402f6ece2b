/**
 * The consumer groups: the one place to declare a consumer. From each entry follow its SQS
 * FIFO queue and DLQ (`storage.ts`), the relay's route from its topics, its Lambda
 * function with the queue as event source (`function-settings.ts`, through
 * `serverless.cjs`), its IAM role, and locally a poller that invokes it (`npm start`).
 */

import { DEFAULT_RETRY_SCHEDULE } from '../../lib/messaging/failures';
import { BROADCAST_TOPIC } from '../../lib/realtime/broadcasts/events';
import { PRESENCE_TOPIC } from '../../lib/realtime/presence/events';
import { EXAMPLE_CONSUMER_VARIABLE } from './names';
import type { Permission } from './template/permissions';

/** A consumer group: one SQS FIFO queue (and its DLQ) subscribed to topics, and its function. */
export interface ConsumerGroupDefinition {
  /** The group name; the queue is `<prefix>-<name>.fifo`, the function `<prefix>-<name>`. */
  readonly name: string;
  /** Topics whose events the relay sends to this group's queue. */
  readonly topics: readonly string[];
  /**
   * The function's handler, as in `serverless.yml` (`functions/<file>.<export>`); it is
   * usually `consumer(<name>, handle)` from `functions/runtime.ts`. Without one the group is
   * a queue only, for a consumer that runs elsewhere (`SqsConsumer` in a container, say):
   * no function, no role.
   */
  readonly handler?: string;
  /**
   * Whether the consumer keeps ack state in the `acks` table (`DynamoAckStore`): a message
   * redelivered after it was handled is acked without running the handler again, and a
   * message that went to the DLQ stays an open hole until a redrive handles it. The role
   * then may read and write the group's ack items.
   * @default false
   */
  readonly ackStore?: boolean;
  /**
   * Seconds the function may run.
   * @default 30
   */
  readonly timeout?: number;
  /**
   * The function's memory, in MB.
   * @default 512
   */
  readonly memorySize?: number;
  /**
   * Messages per invocation (the event source mapping's `BatchSize`, at most 10 for FIFO).
   * @default 10
   */
  readonly batchSize?: number;
  /**
   * Seconds a received message stays invisible; keep at least 6 × the function's timeout
   * (AWS's advice for SQS triggers; the deploy tests check it).
   * @default 6 × timeout
   */
  readonly visibilityTimeout?: number;
  /**
   * Deliveries before a message that keeps failing transiently moves to the DLQ (a
   * permanent failure is parked there at its first delivery). With the consumers' back-off
   * (`DEFAULT_RETRY_SCHEDULE`: 2 s doubling, at most 120 s) keep it at 10 or more: 10
   * deliveries are 486 s of retries, over the 5 minutes no retry path may give up before
   * (`MIN_RETRY_WINDOW_SECONDS`, the deploy tests check it).
   * @default 10
   */
  readonly maxReceiveCount?: number;
  /**
   * What the function may do besides consuming its queue, decoding events (the schema
   * registry) and, with `ackStore`, its ack state: the tables or functions its handler uses.
   * @default none
   */
  readonly permissions?: readonly Permission[];
}

/**
 * The broadcast consumer: history and fan-out (`functions/broadcast.ts`), and the `presence`
 * frames of presence changes (one stream's broadcasts and changes share its message group).
 */
const broadcast: ConsumerGroupDefinition = {
  name: 'broadcast',
  topics: [BROADCAST_TOPIC, PRESENCE_TOPIC],
  handler: 'functions/broadcast.handler',
  // A large audience's frame is delivered by `deliver` tasks, which this waits for (the
  // stream's next frame must not overtake it): ~N / 10,000 s at the default @connections
  // quota. It starts no message of a batch with less than 200 s left (functions/broadcast.ts).
  timeout: 300,
  // No ack store: the broker's source position is its redelivery check.
  ackStore: false,
  // 6 × the timeout, as AWS advises for SQS triggers (a nack still comes back sooner: the
  // consumer sets its own back-off).
  visibilityTimeout: 1800,
  // 486 s of back-off (2 s doubling, at most 120 s) before the DLQ: a throttling episode of
  // minutes no longer dead-letters broadcasts.
  maxReceiveCount: DEFAULT_RETRY_SCHEDULE.maxReceiveCount,
};

/**
 * An example of your own consumer (`functions/consumers/audit.ts`): an audit log of every
 * broadcast, with its ack state in the `acks` table. Deployed only when
 * `LAMBDACABLE_EXAMPLE_CONSUMER=true` (`npm start` and the tests set it).
 */
const audit: ConsumerGroupDefinition = {
  name: 'audit',
  topics: [BROADCAST_TOPIC],
  handler: 'functions/consumers/audit.handler',
  ackStore: true,
  timeout: 10,
};

/** Whether the example consumer is part of this deployment (`LAMBDACABLE_EXAMPLE_CONSUMER`). */
export function exampleConsumerEnabled(env: Readonly<Record<string, string | undefined>>): boolean {
  return env[EXAMPLE_CONSUMER_VARIABLE] === 'true';
}

/**
 * The consumer groups of a deployment whose environment is `env`. Add yours here: a name,
 * its topics, its handler file and options; nothing else needs to change (docs/consumers.md "Your own
 * consumer"). Each side calls it once, at its start, with its environment (serverless.cjs,
 * the functions' settings, npm start): no module reads `process.env` when it is imported.
 */
export function consumerGroupsFor(
  env: Readonly<Record<string, string | undefined>>,
): readonly ConsumerGroupDefinition[] {
  return [broadcast, ...(exampleConsumerEnabled(env) ? [audit] : [])];
}
