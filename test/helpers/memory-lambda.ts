import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { type BatchConsumerOptions, type ConsumedMessage, consumeSqsBatch } from '../../lib/aws';
import { encodeEnvelope } from '../../lib/core';
import type { MemoryQueue, QueuedMessage } from '../../lib/testing';

/** The Lambda SQS event of `messages` taken from a {@link MemoryQueue} (bodies are envelopes). */
export function memorySqsEvent(messages: readonly QueuedMessage[], topic = 't'): SQSEvent {
  return {
    Records: messages.map((m) => ({
      messageId: `${m.id}#${m.receiveCount}`,
      receiptHandle: m.id,
      body: encodeEnvelope(
        {
          id: m.id,
          topic,
          key: m.key,
          type: m.type ?? '',
          headers: m.headers,
          payload: m.value,
          timestamp: 0,
        },
        m.offset,
      ),
      attributes: {
        ApproximateReceiveCount: String(m.receiveCount),
        SentTimestamp: '0',
        SenderId: 'memory',
        ApproximateFirstReceiveTimestamp: '0',
        MessageGroupId: m.key,
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:memory.fifo',
      awsRegion: 'us-east-1',
    })),
  };
}

/**
 * One Lambda invocation on `queue` the way the SQS event source mapping runs it: receive,
 * `consumeSqsBatch`, then delete what succeeded and fail (nack) the `batchItemFailures`.
 * A handler that calls `crash()` ends the invocation there, as a Lambda crash or timeout
 * does: nothing after it runs (no ack write), and every message of the batch comes again.
 */
export async function invokeOnMemoryQueue(
  queue: MemoryQueue,
  handler: (m: ConsumedMessage, crash: () => Promise<never>) => Promise<void>,
  options: BatchConsumerOptions,
): Promise<{ received: number; response: SQSBatchResponse | undefined }> {
  const messages = queue.receive(10);
  if (messages.length === 0) return { received: 0, response: undefined };
  const event = memorySqsEvent(messages);
  let crashed!: () => void;
  const crash = new Promise<undefined>((resolve) => {
    crashed = () => resolve(undefined);
  });
  let response: SQSBatchResponse | undefined;
  try {
    response = await Promise.race([
      consumeSqsBatch(
        event,
        (m) =>
          handler(m, () => {
            crashed();
            return new Promise<never>(() => {});
          }),
        options,
      ),
      crash,
    ]);
  } catch {
    response = undefined;
  }
  const failed = new Set(response?.batchItemFailures.map((f) => f.itemIdentifier) ?? []);
  event.Records.forEach((r, i) => {
    const m = messages[i]!;
    if (response === undefined || failed.has(r.messageId)) queue.nack(m, 'failed');
    else queue.ack(m);
  });
  return { received: messages.length, response };
}
