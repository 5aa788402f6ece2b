/**
 * The names the deploy, the local stack and the functions share: the environment variables a
 * function reads its resources from, the physical names of the tables and queues, and the
 * CloudFormation logical ids of the resources. It imports nothing, so every side can take a
 * name from here without taking the code that builds the template.
 */

/** The logical tables, in the order the template declares them. */
export const TABLE_NAMES = [
  'outbox',
  'history',
  'sessions',
  'connections',
  'acks',
  'schemas',
  'idempotency',
] as const;

/** A logical table. */
export type TableName = (typeof TABLE_NAMES)[number];

/** Physical table name. */
export function tableName(prefix: string, table: TableName): string {
  return `${prefix}-${table}`;
}

/** Physical queue names of a group. */
export function queueNames(prefix: string, group: string): { queue: string; dlq: string } {
  return { queue: `${prefix}-${group}.fifo`, dlq: `${prefix}-${group}-dlq.fifo` };
}

/**
 * Physical name of the standard queue that receives the stream relay's on-failure records
 * (Lambda's metadata of a batch it gave up): what `npm run relay:replay` reads.
 */
export function relayFailuresQueueName(prefix: string): string {
  return `${prefix}-relay-failures`;
}

/**
 * Physical names of the client frames queue (API Gateway's `$default` route sends each frame
 * there, grouped by connection) and its DLQ.
 */
export function framesQueueNames(prefix: string): { queue: string; dlq: string } {
  return queueNames(prefix, FRAMES);
}

/** The client frames queue's name part: `queueNames(prefix, FRAMES)`, `queueLogicalIds(FRAMES)`. */
export const FRAMES = 'frames';

/**
 * Logical ids of the `$default` route's SQS integration, the route, and the role API Gateway
 * sends frames with.
 */
export const FRAMES_INTEGRATION = 'FramesIntegration';
export const FRAMES_ROUTE = 'FramesRoute';
export const FRAMES_SENDER_ROLE = 'FramesSenderRole';

/** Environment variable holding the client frames queue's URL (`npm start` sends frames there). */
export const FRAMES_QUEUE_VARIABLE = 'LAMBDACABLE_FRAMES_QUEUE';

/** Environment variable holding a table's physical name. */
export function tableVariable(table: TableName): string {
  return `LAMBDACABLE_TABLE_${table.toUpperCase()}`;
}

/** Environment variable holding a consumer group's queue URL. */
export function queueUrlVariable(group: string): string {
  return `LAMBDACABLE_QUEUE_${group.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}`;
}

/** Environment variable holding a consumer group's DLQ URL (where it parks poison messages). */
export function dlqUrlVariable(group: string): string {
  return `LAMBDACABLE_DLQ_${group.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}`;
}

/** Environment variable holding the relay failures queue URL (where the relay parks records). */
export const RELAY_FAILURES_URL_VARIABLE = 'LAMBDACABLE_RELAY_FAILURES_QUEUE';

/** Environment variable holding the deployed name of the function that runs fan-out tasks. */
export const DELIVER_FUNCTION_VARIABLE = 'LAMBDACABLE_DELIVER_FUNCTION';

/**
 * Environment variable that adds the example consumer group `audit` to a deployment when it
 * is `true` (`consumerGroupsFor`).
 */
export const EXAMPLE_CONSUMER_VARIABLE = 'LAMBDACABLE_EXAMPLE_CONSUMER';

/** A name as a CloudFormation logical id part: `outbox-relay` → `OutboxRelay`. */
export function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

/** Logical id of a table resource, e.g. `OutboxTable`. */
export function tableLogicalId(table: TableName): string {
  return `${pascal(table)}Table`;
}

/** Logical ids of a consumer group's queue and DLQ, e.g. `BroadcastQueue`, `BroadcastDlq`. */
export function queueLogicalIds(group: string): { queue: string; dlq: string } {
  return { queue: `${pascal(group)}Queue`, dlq: `${pascal(group)}Dlq` };
}

/** Logical id of a function's role, e.g. `OutboxRelayRole`. */
export function roleLogicalId(functionKey: string): string {
  return `${pascal(functionKey)}Role`;
}

/** Where stream records the relay could not deliver after its retries go. */
export const RELAY_FAILURES_QUEUE = 'RelayFailuresQueue';

/** The WebSocket API's logical id, as the Serverless Framework names it. */
export const WEBSOCKET_API = 'WebsocketsApi';

/** Logical ids of the alarms `npm start` also prints (infra/local/local-alarms.ts). */
export const RELAY_FAILURES_ALARM = 'RelayFailuresAlarm';
export const RELAY_LAG_ALARM = 'RelayLagAlarm';
export const UNDELIVERED_FRAMES_ALARM = 'UndeliveredFramesAlarm';
export const RELAY_REFUSED_ALARM = 'RelayRefusedAlarm';

/** The alarm topic's logical id (when the stack makes its own). */
export const ALARM_TOPIC = 'AlarmTopic';

/** The dashboard's logical id. */
export const DASHBOARD = 'Dashboard';

/** Logical ids of a consumer group's alarms. */
export function alarmIds(group: string): { deadLetters: string; backlog: string } {
  const name = pascal(group);
  return { deadLetters: `${name}DlqAlarm`, backlog: `${name}QueueAgeAlarm` };
}

/** Logical id of a function's `Errors` alarm. */
export function errorsAlarmId(functionKey: string): string {
  return `${pascal(functionKey)}ErrorsAlarm`;
}
