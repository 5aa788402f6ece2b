/** The CloudWatch dashboard of the whole path, one row per stage an event travels. */

import type { ConsumerGroupDefinition } from '../consumers';
import { queueNames, relayFailuresQueueName, tableName, WEBSOCKET_API } from '../names';
import type { Json } from '../template/types';
import { erroringFunctions, METRICS_NAMESPACE, METRICS_SERVICE } from './settings';

/** What the dashboard is drawn from (the options of `monitoring`). */
export interface DashboardOptions {
  readonly prefix: string;
  readonly functionName: (key: string) => string;
  readonly groups: readonly ConsumerGroupDefinition[];
  /** The refused-records metric of the relay, drawn when given. */
  readonly relayRefusedMetric?: string;
}

type Metric = (string | { stat?: string; label?: string; yAxis?: string })[];

/** The dashboard: one row per stage of the path, in the order an event travels it. */
export function dashboardBody(options: DashboardOptions): Json {
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
