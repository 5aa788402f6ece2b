import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { errorMessage, LambdacableError } from '../../../kernel/errors.js';
import { PartitionAckManager } from '../../../messaging/ack-manager.js';
import {
  type AckState,
  type AckStore,
  type AckUpdate,
  ackPartition,
  isAcked,
} from '../../../messaging/ack-store.js';
import { decodeEnvelope, type Envelope } from '../../../messaging/envelope.js';
import { classifyFailure } from '../../../messaging/failures.js';
import type { Message } from '../../../messaging/types.js';
import { messageGroupId } from '../relay/relay.js';
import { parkSqsRecord } from './dead-letter.js';
import { processGroups } from './groups.js';
import { delayRedelivery } from './redelivery.js';

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
  /**
   * Sent again by `relay:replay`: handled even when its offset is at or below the ack
   * level (its key may have gone on meanwhile), so it may be a duplicate; deduplicate by `id`.
   */
  readonly replayed: boolean;
}

/** Options of {@link consumeSqsBatch}. */
export interface BatchConsumerOptions {
  /**
   * The consumer group: ack state is kept per group, topic and partition
   * ({@link ackPartition}), since offsets only order the messages of one topic and key.
   */
  readonly group: string;
  /**
   * Persists ack state (level and open holes); a redelivered message that is done under
   * it is acked unhandled, a redriven message of an open hole is handled.
   */
  readonly ackStore?: AckStore;
  /**
   * Delays a nacked message's redelivery (`ChangeMessageVisibility`) by
   * `backoffSeconds(receiveCount)`; without it the queue's visibility timeout applies.
   */
  readonly visibility?: {
    readonly sqs: SQSClient;
    /** The queue URL of a record's `eventSourceARN`. */
    readonly queueUrl: (eventSourceArn: string) => string;
    /**
     * @default `backoffSeconds` of `DEFAULT_RETRY_SCHEDULE`: 2 × 2^(receiveCount − 1) s, at
     * most 120 (with 10 deliveries, 486 s of retries before the DLQ)
     */
    readonly backoffSeconds?: (receiveCount: number) => number;
  };
  /**
   * Parks a message that can never be handled (`classifyFailure` says `permanent`: an
   * undecodable envelope or payload, an unknown event type, bad JSON) in the group's DLQ at
   * once, with its body, group and attributes and why ({@link parkInDeadLetterQueue}); the
   * message is then done here (deleted, its offset an open hole in the ack state, so later
   * offsets go on) and its group goes on. Without it, or when parking fails, such a message
   * is nacked like any failure and dead-letters after `maxReceiveCount` deliveries.
   * @default none
   */
  readonly deadLetter?: {
    readonly sqs: SQSClient;
    /** The DLQ URL of a record's `eventSourceARN`. */
    readonly queueUrl: (eventSourceArn: string) => string;
  };
  /**
   * Open holes stamped longer ago than this are forgotten (their message left every queue);
   * a hole is stamped anew each time its message fails again.
   * @default 28 days: 14 in the queue and 14 more in a FIFO dead-letter queue
   */
  readonly holeRetentionMs?: number;
  /**
   * Message groups handled at once. A group's messages are handled one after another, in
   * order; different groups' at the same time, so that one partition's slow message (a
   * broadcast to 100k subscribers) holds up no other partition's in the batch. 1 handles
   * the batch's records one after another, as they came.
   * @default every group of the batch (a FIFO batch holds at most 10 records)
   */
  readonly groupConcurrency?: number;
  /** @default Date.now */
  readonly now?: () => number;
  /** Logs failures. @default console */
  readonly logger?: Pick<Console, 'error' | 'warn'>;
}

/** What {@link consumeSqsBatch} did: the records to retry, and how many it parked. */
export interface ConsumeResult extends SQSBatchResponse {
  /** Messages parked in the DLQ as permanent failures (see `deadLetter`): done, not failed. */
  readonly parked: number;
}

/** What a handler throws or passes to `nack` becomes the failure. */
export class NackError extends LambdacableError {
  readonly messageId: string;
  constructor(messageId: string, reason: unknown) {
    super(`message ${messageId} was nacked: ${errorMessage(reason)}`, {
      cause: reason,
    });
    this.name = 'NackError';
    this.messageId = messageId;
  }
}

interface PartitionBatch {
  /** The stored state when the batch started (after the pre-write, if any). */
  state: AckState | undefined;
  /** Records of the partition in batch order with their decoded offsets. */
  readonly records: { record: SQSRecord; offset: bigint }[];
  /** Offsets completed in this batch. */
  readonly completed: Set<bigint>;
  /** Holes completed in this batch. */
  readonly closed: bigint[];
}

/**
 * Consumes one Lambda SQS FIFO batch: each record becomes a {@link Message} for
 * `handler`; a failure fails only its own message group (Powertools
 * `SqsFifoPartialProcessorAsync` with `skipGroupOnError`), and groups are handled at the
 * same time, each in its order ({@link BatchConsumerOptions.groupConcurrency}). The first of `ack()` and
 * `nack()` decides, as in Cadence: a message acked and then thrown from is done (logged,
 * not retried); one nacked and then returned from is retried. A handler that calls
 * neither acks by returning and nacks by throwing.
 *
 * With an `ackStore`, per partition: one read of the {@link AckState} before the batch
 * and one merged write after it. Offsets above the stored level are read into an
 * `AckManager` in batch order; after the batch the level rises to the highest of
 * them and those not completed (failed, or skipped behind a failure) are stored as open
 * holes, so a message that then goes to the DLQ stays a hole while later offsets of its
 * partition complete. A message that is done (at or below the level, not below the
 * state's floor, not a hole) is acked without calling the handler; a hole's message (a
 * retry or a DLQ redrive) is handled, its success closes the hole and its failure stamps
 * the hole anew. State created afresh (the first message of a partition, or the first after
 * its ack item expired) gets the batch's lowest offset as its floor: an older message that
 * comes later is handled, never acked unhandled under a level it did not take part in. A record delivered again (`ApproximateReceiveCount`
 * > 1) that the state does not know yet means an earlier invocation ended without
 * writing (a crash, a timeout, a failed ack write): its partition's new offsets are then
 * stored as holes before the handler runs, so they stay holes even if they end up in the
 * DLQ without this function ever finishing. A replayed message (`relay:replay`, see
 * {@link ConsumedMessage.replayed}) at or below the level is handled too and changes no state.
 *
 * Poison versus transient (`classifyFailure`): with `deadLetter`, a permanent failure (an
 * undecodable envelope or payload, an unknown event type, bad JSON) is parked in the DLQ at
 * its first delivery and its group goes on; a transient one (throttling, a 5xx, a timeout,
 * anything else) is retried after `backoffSeconds`, up to the queue's `maxReceiveCount`.
 */
export async function consumeSqsBatch(
  event: SQSEvent,
  handler: (message: ConsumedMessage) => Promise<void>,
  options: BatchConsumerOptions,
): Promise<ConsumeResult> {
  const logger = options.logger ?? console;
  const now = options.now ?? Date.now;
  const store = options.ackStore;
  const envelopes = new Map<string, Envelope | Error>();
  const batches = new Map<string, PartitionBatch>();
  for (const r of event.Records) {
    try {
      const envelope = decodeEnvelope(r.body, r.messageId);
      envelopes.set(r.messageId, envelope);
      const partition = partitionOf(envelope);
      let batch = batches.get(partition);
      if (!batch) {
        batch = { state: undefined, records: [], completed: new Set(), closed: [] };
        batches.set(partition, batch);
      }
      batch.records.push({ record: r, offset: envelope.offset });
    } catch (error) {
      envelopes.set(r.messageId, error as Error);
    }
  }
  const acks = new PartitionAckManager();
  const storeFailed = new Set<string>();
  await Promise.all(
    [...batches].map(async ([partition, batch]) => {
      try {
        if (store) batch.state = await store.loadState(options.group, partition);
        const fresh = batch.records.filter((r) => isNew(batch.state, r.offset));
        const floor = minOf(fresh.map((r) => r.offset));
        const redelivered = fresh.some(
          (r) => Number(r.record.attributes.ApproximateReceiveCount ?? '1') > 1,
        );
        if (store && redelivered) {
          batch.state = await store.commit(
            options.group,
            partition,
            {
              level: maxOf(fresh.map((r) => r.offset)),
              open: fresh.map((r) => r.offset),
              ...(floor === undefined ? {} : { floor }),
              now: now(),
              ...retention(options),
            },
            { state: batch.state },
          );
        }
        for (const r of batch.records) {
          if (!isNew(batch.state, r.offset)) continue;
          const read = acks.get(partition)?.getReadLevel();
          // A second copy of an offset (a relay resend after the dedup window) is not re-read.
          if (read === undefined || r.offset > read) acks.readItem(partition, r.offset);
        }
      } catch (error) {
        logger.error(
          `ack state of ${options.group}#${partition} unavailable, its records are retried: ${(error as Error).message}`,
        );
        storeFailed.add(partition);
      }
    }),
  );

  let parked = 0;
  /** Parks a permanent failure; false when it is transient, or parking is off or failed. */
  const park = async (record: SQSRecord, reason: unknown): Promise<boolean> => {
    if (!options.deadLetter || classifyFailure(reason) !== 'permanent') return false;
    const done = await parkSqsRecord(options.deadLetter, record, reason, logger);
    if (done) parked++;
    return done;
  };

  const recordHandler = async (record: SQSRecord): Promise<void> => {
    const envelope = envelopes.get(record.messageId);
    if (envelope instanceof Error || envelope === undefined) {
      const error = envelope ?? new LambdacableError(`no envelope for ${record.messageId}`);
      if (await park(record, error)) return;
      logger.error(`nack ${record.messageId}: ${error.message}`);
      throw error;
    }
    const partition = partitionOf(envelope);
    if (storeFailed.has(partition)) {
      throw new LambdacableError(`ack state of ${options.group}#${partition} unavailable`);
    }
    const batch = batches.get(partition)!;
    const offset = envelope.offset;
    if (batch.completed.has(offset)) return; // a second copy in this batch
    const hole = batch.state?.holes.has(offset) ?? false;
    // A replayed event (relay:replay) below the level is handled, at least once: its key may
    // have gone on while the relay was failing, so the level says nothing about it.
    const replayedBelow = envelope.replayed === true && !isNew(batch.state, offset) && !hole;
    if (!hole && !replayedBelow && isAcked(batch.state, offset)) return; // already handled
    // The first of ack() and nack() settles the message (Cadence: an ack is final); a
    // return without either is an ack, a throw without either a nack.
    let settled: { acked: true } | { acked: false; reason: unknown } | undefined;
    const message: ConsumedMessage = {
      value: envelope.payload,
      // The SQS group id: the key itself unless SQS could not take it (then its hash).
      partition: messageGroupId(envelope.key),
      offset,
      id: envelope.id,
      topic: envelope.topic,
      type: envelope.type,
      headers: envelope.headers,
      timestamp: envelope.timestamp,
      receiveCount: Number(record.attributes.ApproximateReceiveCount ?? '1'),
      replayed: envelope.replayed === true,
      ack: async () => {
        settled ??= { acked: true };
      },
      nack: async (reason?: unknown) => {
        settled ??= { acked: false, reason: reason ?? 'nack' };
      },
    };
    try {
      await handler(message);
    } catch (error) {
      if (settled?.acked) {
        logger.warn(
          `message ${record.messageId} was acked, then its handler threw (not retried): ${errorMessage(error)}`,
        );
      }
      settled ??= { acked: false, reason: error };
    }
    if (settled && !settled.acked) {
      // Parked: done here; its offset stays outstanding, so it is stored as an open hole (a
      // redrive handles it) while the partition's later offsets go on.
      if (await park(record, settled.reason)) return;
      const error = new NackError(record.messageId, settled.reason);
      logger.error(error.message);
      throw error;
    }
    batch.completed.add(offset);
    if (replayedBelow) return; // the ack state already counts it as done
    if (hole) batch.closed.push(offset);
    else acks.complete(partition, offset);
  };

  const processed = await processGroups(event, recordHandler, options.groupConcurrency);
  // A copy: Powertools returns one shared empty response object when nothing failed.
  const response: SQSBatchResponse = { batchItemFailures: [...processed.batchItemFailures] };

  if (store) {
    await Promise.all(
      [...batches].map(async ([partition, batch]) => {
        if (storeFailed.has(partition)) return;
        const manager = acks.get(partition);
        // Holes whose message came again (a retry, a redrive) and failed once more.
        const reopened = batch.records
          .filter((r) => batch.state?.holes.has(r.offset) && !batch.completed.has(r.offset))
          .map((r) => r.offset);
        const floor = manager ? minOf(batch.records.map((r) => r.offset)) : undefined;
        const update: AckUpdate = {
          ...(manager ? { level: manager.getReadLevel() } : {}),
          open: [...(manager?.getOutstandingIds() ?? []), ...reopened],
          close: batch.closed,
          ...(floor === undefined ? {} : { floor }),
          now: now(),
          ...retention(options),
        };
        if (!manager && batch.closed.length === 0 && reopened.length === 0) return; // nothing new: no write
        try {
          await store.commit(options.group, partition, update, { state: batch.state });
        } catch (error) {
          // Unrecorded progress must not be deleted: the partition's records come again
          // (handled again: at least once) and the redelivery stores them as holes first.
          logger.error(
            `ack write of ${options.group}#${partition} failed, its records are retried: ${(error as Error).message}`,
          );
          storeFailed.add(partition);
        }
      }),
    );
  }
  if (storeFailed.size > 0) {
    const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
    for (const partition of storeFailed) {
      for (const { record } of batches.get(partition)?.records ?? []) {
        if (!failed.has(record.messageId)) {
          response.batchItemFailures.push({ itemIdentifier: record.messageId });
          failed.add(record.messageId);
        }
      }
    }
  }
  if (options.visibility && response.batchItemFailures.length > 0) {
    await delayRedelivery(event, response, options.visibility, logger);
  }
  return { batchItemFailures: response.batchItemFailures, parked };
}

/** The ack partition of a message: its topic and its SQS message group. */
function partitionOf(envelope: Envelope): string {
  return ackPartition(envelope.topic, messageGroupId(envelope.key));
}

/** Neither done nor a hole: above the stored level, or below its floor. */
function isNew(state: AckState | undefined, offset: bigint): boolean {
  return state === undefined || (!state.holes.has(offset) && !isAcked(state, offset));
}

function minOf(offsets: readonly bigint[]): bigint | undefined {
  let min: bigint | undefined;
  for (const o of offsets) if (min === undefined || o < min) min = o;
  return min;
}

function maxOf(offsets: readonly bigint[]): bigint | undefined {
  let max: bigint | undefined;
  for (const o of offsets) if (max === undefined || o > max) max = o;
  return max;
}

function retention(options: BatchConsumerOptions): { holeRetentionMs?: number } {
  return options.holeRetentionMs === undefined ? {} : { holeRetentionMs: options.holeRetentionMs };
}
