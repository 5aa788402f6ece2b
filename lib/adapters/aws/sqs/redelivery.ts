import { ChangeMessageVisibilityBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { backoffSeconds } from '../../../messaging/failures.js';

/**
 * Delays the redelivery of the failed records of `event` (`ChangeMessageVisibilityBatch`) by
 * `backoffSeconds(receiveCount)`: the consumers' transient retry schedule. A change that
 * fails is logged: the queue's visibility timeout still brings the message back.
 */
export async function delayRedelivery(
  event: SQSEvent,
  response: SQSBatchResponse,
  visibility: {
    readonly sqs: SQSClient;
    readonly queueUrl: (eventSourceArn: string) => string;
    readonly backoffSeconds?: (receiveCount: number) => number;
  },
  logger: Pick<Console, 'error' | 'warn'>,
): Promise<void> {
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const backoff = visibility.backoffSeconds ?? ((n: number) => backoffSeconds(n));
  const byQueue = new Map<string, SQSRecord[]>();
  for (const r of event.Records) {
    if (!failed.has(r.messageId)) continue;
    const url = visibility.queueUrl(r.eventSourceARN);
    byQueue.set(url, [...(byQueue.get(url) ?? []), r]);
  }
  for (const [url, records] of byQueue) {
    for (let i = 0; i < records.length; i += 10) {
      const chunk = records.slice(i, i + 10);
      try {
        await visibility.sqs.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: url,
            Entries: chunk.map((r, j) => ({
              Id: `m${i + j}`,
              ReceiptHandle: r.receiptHandle,
              VisibilityTimeout: backoff(Number(r.attributes.ApproximateReceiveCount ?? '1')),
            })),
          }),
        );
      } catch (error) {
        // The queue's visibility timeout still brings the message back.
        logger.warn(`could not delay redelivery on ${url}`, error);
      }
    }
  }
}
