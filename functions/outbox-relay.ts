import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { runtime, metrics as runtimeMetrics, relay as runtimeRelay } from './runtime';

/** DynamoDB Stream of the outbox table → SQS FIFO queues of the subscribed groups. */
export const handler = async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const { logger } = runtime();
  const metrics = runtimeMetrics();
  const result = await runtimeRelay().relay(event.Records);
  metrics.addMetric('relayedMessages', MetricUnit.Count, result.sent);
  metrics.addMetric('skippedRecords', MetricUnit.Count, result.skipped);
  metrics.addMetric('relayRetries', MetricUnit.Count, result.batchItemFailures.length);
  metrics.publishStoredMetrics();
  logger.info('outbox relayed', {
    records: event.Records.length,
    sent: result.sent,
    skipped: result.skipped,
    retryFrom: result.batchItemFailures[0]?.itemIdentifier,
  });
  return { batchItemFailures: result.batchItemFailures };
};
