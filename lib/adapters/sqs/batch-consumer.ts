import { processPartialResponse, SqsFifoPartialProcessorAsync } from '@aws-lambda-powertools/batch';
import { ChangeMessageVisibilityBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { LambdacableError } from '../../errors.js';
import { PartitionAckManager } from '../../messaging/ack-manager.js';
import type { AckStore } from '../../messaging/ack-store.js';
import { decodeEnvelope, type Envelope } from '../../messaging/envelope.js';
import type { Message } from '../../messaging/types.js';

/** A consumed message with everything the envelope carries. */
export interface ConsumedMessage extends Message {
  /** The event id (the SQS deduplication id). */
  readonly id: string;
  readonly topic: string;
  /** The event type name; empty for raw messages. */
  readonly type: string;
  readonly headers: Readonly<Record<string, string>>;
  /** When the event was written, in ms. */
  readonly timestamp: number;
  /** How often SQS has delivered this message, this time included. */
  readonly receiveCount: number;
}

/** Options of {@link consumeSqsBatch}. */
export interface BatchConsumerOptions {
  /** The consumer group: ack levels are kept per group and partition. */
  readonly group: string;
  /** Persists ack levels; a redelivered message at or below its level is acked unhandled. */
  readonly ackStore?: AckStore;
  /**
   * Delays a nacked message's redelivery (`ChangeMessageVisibility`) by
   * `backoffSeconds(receiveCount)`; without it the queue's visibility timeout applies.
   */
  readonly visibility?: {
    readonly sqs: SQSClient;
    /** The queue URL of a record's `eventSourceARN`. */
    readonly queueUrl: (eventSourceArn: string) => string;
    /** @default 2^receiveCount seconds, at most 900 */
    readonly backoffSeconds?: (receiveCount: number) => number;
  };
  /** Logs failures. @default console */
  readonly logger?: Pick<Console, 'error' | 'warn'>;
}

/** What a handler throws or passes to `nack` becomes the failure. */
export class NackError extends LambdacableError {
  readonly messageId: string;
  constructor(messageId: string, reason: unknown) {
    super(
      `message ${messageId} was nacked: ${reason instanceof Error ? reason.message : String(reason)}`,
      {
        cause: reason,
      },
    );
    this.name = 'NackError';
    this.messageId = messageId;
  }
}

/**
 * Consumes one Lambda SQS FIFO batch: each record becomes a {@link Message} for
 * `handler`; a failure (throw or `nack`) fails only its own message group (Powertools
 * `SqsFifoPartialProcessorAsync` with `skipGroupOnError`). Ack levels per partition are
 * tracked with an {@link PartitionAckManager} and persisted forward-only.
 */
export async function consumeSqsBatch(
  event: SQSEvent,
  handler: (message: ConsumedMessage) => Promise<void>,
  options: BatchConsumerOptions,
): Promise<SQSBatchResponse> {
  const logger = options.logger ?? console;
  const envelopes = new Map<string, Envelope | Error>();
  for (const r of event.Records) {
    try {
      envelopes.set(r.messageId, decodeEnvelope(r.body, r.messageId));
    } catch (error) {
      envelopes.set(r.messageId, error as Error);
    }
  }
  const partitions = new Set<string>();
  for (const e of envelopes.values()) if (!(e instanceof Error)) partitions.add(e.key);
  const stored = new Map<string, bigint | undefined>();
  await Promise.all(
    [...partitions].map(async (p) => {
      stored.set(p, await options.ackStore?.load(options.group, p));
    }),
  );
  const acks = new PartitionAckManager();
  // Partitions where this batch completed something: only their levels move. (The ack
  // level of a partition whose first message failed is that offset - 1, which says
  // nothing new and would wrongly cover a dead-lettered message redriven later.)
  const completed = new Set<string>();

  const recordHandler = async (record: SQSRecord): Promise<void> => {
    const envelope = envelopes.get(record.messageId);
    if (envelope instanceof Error || envelope === undefined) {
      logger.error(`nack ${record.messageId}: ${envelope?.message ?? 'no envelope'}`);
      throw envelope ?? new LambdacableError(`no envelope for ${record.messageId}`);
    }
    const partition = envelope.key;
    const level = stored.get(partition);
    if (level !== undefined && envelope.offset <= level) return; // already handled: ack unhandled
    if (acks.get(partition) === undefined && level !== undefined) {
      acks.readItem(partition, level);
      acks.complete(partition, level);
    }
    acks.readItem(partition, envelope.offset);
    let nacked: unknown;
    let wasNacked = false;
    const message: ConsumedMessage = {
      value: envelope.payload,
      partition,
      offset: envelope.offset,
      id: envelope.id,
      topic: envelope.topic,
      type: envelope.type,
      headers: envelope.headers,
      timestamp: envelope.timestamp,
      receiveCount: Number(record.attributes.ApproximateReceiveCount ?? '1'),
      ack: async () => {},
      nack: async (reason?: unknown) => {
        wasNacked = true;
        nacked = reason;
      },
    };
    try {
      await handler(message);
    } catch (error) {
      wasNacked = true;
      nacked = error;
    }
    if (wasNacked) {
      const error = new NackError(record.messageId, nacked ?? 'nack');
      logger.error(error.message);
      throw error;
    }
    acks.complete(partition, envelope.offset);
    completed.add(partition);
  };

  const processor = new SqsFifoPartialProcessorAsync();
  const response = await processPartialResponse(event, recordHandler, processor, {
    skipGroupOnError: true,
    throwOnFullBatchFailure: false,
  });

  await Promise.all(
    acks.partitions().map(async (p) => {
      if (!completed.has(p)) return;
      const level = acks.ackLevel(p);
      const before = stored.get(p);
      if (
        options.ackStore &&
        level !== undefined &&
        level >= 0n &&
        (before === undefined || level > before)
      ) {
        await options.ackStore.save(options.group, p, level);
      }
    }),
  );
  if (options.visibility && response.batchItemFailures.length > 0) {
    await delayRedelivery(event, response, options.visibility, logger);
  }
  return response;
}

async function delayRedelivery(
  event: SQSEvent,
  response: SQSBatchResponse,
  visibility: NonNullable<BatchConsumerOptions['visibility']>,
  logger: Pick<Console, 'error' | 'warn'>,
): Promise<void> {
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const backoff = visibility.backoffSeconds ?? ((n: number) => Math.min(900, 2 ** n));
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
