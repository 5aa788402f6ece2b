import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { runtime, metrics as runtimeMetrics, relay as runtimeRelay } from './runtime';

/**
 * DynamoDB Stream of the outbox table → SQS FIFO queues of the subscribed groups. A record
 * the relay refuses (unreadable, a body over the SQS limit, an entry SQS refuses with
 * SenderFault) is parked in relay-failures with its item and the shard goes on (counted in
 * `relayRefusedRecords`, alarmed); one it could not park is a batch item failure. A transient
 * failure is retried in the invocation, then by Lambda (`maximumRetryAttempts`).
 */
export const handler = async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const { logger } = runtime();
  const metrics = runtimeMetrics();
  const result = await runtimeRelay().relay(event.Records);
  metrics.addMetric('relayedMessages', MetricUnit.Count, result.sent);
  metrics.addMetric('relayRefusedRecords', MetricUnit.Count, result.refused);
  metrics.addMetric('relayParkedRecords', MetricUnit.Count, result.parked);
  metrics.addMetric('relayRetries', MetricUnit.Count, result.batchItemFailures.length);
  metrics.publishStoredMetrics();
  if (result.refused > 0) {
    // Parked ones are overtaken by their key's later records until relay:replay sends them.
    logger.error('outbox records refused: parked in relay-failures, or else retried', {
      sequenceNumbers: result.refusedSequenceNumbers,
      parked: result.parked,
    });
  }
  logger.info('outbox relayed', {
    records: event.Records.length,
    sent: result.sent,
    refused: result.refused,
    parked: result.parked,
    retryFrom: result.batchItemFailures[0]?.itemIdentifier,
  });
  return { batchItemFailures: result.batchItemFailures };
};
