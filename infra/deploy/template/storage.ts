/**
 * The tables and queues as CloudFormation resources, from the same definitions as the local
 * bootstrap: the tables, the consumer group queues with their DLQs, and the stream relay's
 * failure queue.
 */

import { DEFAULT_RETRY_SCHEDULE } from '../../../lib/messaging/failures';
import type { ConsumerGroupDefinition } from '../consumers';
import { DEFAULT_FUNCTION_TIMEOUT, DLQ_RETENTION_SECONDS, tables } from '../definitions';
import {
  queueLogicalIds,
  queueNames,
  RELAY_FAILURES_QUEUE,
  relayFailuresQueueName,
  type TableName,
  tableLogicalId,
  tableName,
} from '../names';
import type { Json, Resource } from './types';

/**
 * Tables whose data cannot be rebuilt: committed events not yet relayed (`outbox`), the
 * consumers' ack state (`acks`), and schema ids that encoded payloads refer to (`schemas`).
 * They survive a stack deletion or replacement (`Retain`), refuse a delete (deletion
 * protection) and have point-in-time recovery. The others hold minutes of state (history,
 * sessions, connections) that clients rebuild by reconnecting.
 */
export const STATEFUL_TABLES: readonly TableName[] = ['outbox', 'acks', 'schemas'];

/** The visibility timeout of a group's queue: as declared, else 6 × its function's timeout. */
export function visibilityTimeoutOf(group: ConsumerGroupDefinition): number {
  return group.visibilityTimeout ?? 6 * (group.timeout ?? DEFAULT_FUNCTION_TIMEOUT);
}

/** Every table, by logical id: keys, indexes, stream, TTL, and the stateful ones kept. */
export function tableResources(prefix: string): Record<string, Resource> {
  const Resources: Record<string, Resource> = {};
  for (const [name, def] of Object.entries(tables) as [TableName, (typeof tables)[TableName]][]) {
    const { ttlAttribute, ...rest } = def;
    const stateful = STATEFUL_TABLES.includes(name);
    Resources[tableLogicalId(name)] = {
      Type: 'AWS::DynamoDB::Table',
      ...(stateful ? { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' } : {}),
      Properties: {
        TableName: tableName(prefix, name),
        BillingMode: 'PAY_PER_REQUEST',
        ...(JSON.parse(JSON.stringify(rest)) as Record<string, Json>),
        ...(ttlAttribute
          ? { TimeToLiveSpecification: { AttributeName: ttlAttribute, Enabled: true } }
          : {}),
        ...(stateful
          ? {
              PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
              DeletionProtectionEnabled: true,
            }
          : {}),
      },
    };
  }
  return Resources;
}

/**
 * Each group's FIFO queue and DLQ, and the relay failures queue, by logical id; and the
 * outputs of the queues' URLs.
 */
export function queueResources(
  prefix: string,
  groups: readonly ConsumerGroupDefinition[],
): { Resources: Record<string, Resource>; Outputs: Record<string, Json> } {
  const Resources: Record<string, Resource> = {};
  const Outputs: Record<string, Json> = {};
  for (const group of groups) {
    const ids = queueLogicalIds(group.name);
    Object.assign(
      Resources,
      fifoQueuePair(queueNames(prefix, group.name), ids, {
        // Dedup is by event id (the relay sets MessageDeduplicationId).
        visibilityTimeout: visibilityTimeoutOf(group),
        maxReceiveCount: group.maxReceiveCount ?? DEFAULT_RETRY_SCHEDULE.maxReceiveCount,
      }),
    );
    Outputs[`${ids.queue}Url`] = { Value: { Ref: ids.queue } };
  }

  Resources[RELAY_FAILURES_QUEUE] = {
    Type: 'AWS::SQS::Queue',
    Properties: {
      QueueName: relayFailuresQueueName(prefix),
      MessageRetentionPeriod: DLQ_RETENTION_SECONDS,
    },
  };
  return { Resources, Outputs };
}

/**
 * A FIFO queue and the FIFO DLQ its redrive policy moves a message to after
 * `maxReceiveCount` receives, by logical id. The deduplication id is the sender's, per message
 * group, so high-throughput FIFO applies.
 */
export function fifoQueuePair(
  names: { queue: string; dlq: string },
  ids: { queue: string; dlq: string },
  settings: { visibilityTimeout: number; maxReceiveCount: number },
): Record<string, Resource> {
  return {
    [ids.dlq]: {
      Type: 'AWS::SQS::Queue',
      Properties: {
        QueueName: names.dlq,
        FifoQueue: true,
        MessageRetentionPeriod: DLQ_RETENTION_SECONDS,
      },
    },
    [ids.queue]: {
      Type: 'AWS::SQS::Queue',
      Properties: {
        QueueName: names.queue,
        FifoQueue: true,
        ContentBasedDeduplication: false,
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
        VisibilityTimeout: settings.visibilityTimeout,
        RedrivePolicy: {
          deadLetterTargetArn: { 'Fn::GetAtt': [ids.dlq, 'Arn'] },
          maxReceiveCount: settings.maxReceiveCount,
        },
      },
    },
  };
}
