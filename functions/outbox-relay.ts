import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { runtime, metrics as runtimeMetrics, relay as runtimeRelay } from './runtime';

/**
 * DynamoDB Stream of the outbox table → SQS FIFO queues of the subscribed groups. A record
 * the relay refuses (unreadable, or a body over the SQS limit) is a batch item failure:
 * Lambda retries it, then hands the batch to the relay-failures destination.
 */
export const handler = async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const { logger } = runtime();
  const metrics = runtimeMetrics();
  const result = await runtimeRelay().relay(event.Records);
  metrics.addMetric('relayedMessages', MetricUnit.Count, result.sent);
  metrics.addMetric('relayRefusedRecords', MetricUnit.Count, result.refused);
  metrics.addMetric('relayRetries', MetricUnit.Count, result.batchItemFailures.length);
  metrics.publishStoredMetrics();
  if (result.refused > 0) {
    logger.error('outbox records refused: retried, then sent to relay-failures', {
      sequenceNumbers: result.refusedSequenceNumbers,
    });
  }
  logger.info('outbox relayed', {
    records: event.Records.length,
    sent: result.sent,
    refused: result.refused,
    retryFrom: result.batchItemFailures[0]?.itemIdentifier,
  });
  return { batchItemFailures: result.batchItemFailures };
};
