import { createHash } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';
import {
  type LambdacableError,
  LimitExceededError,
  MessageFormatError,
} from '../../../kernel/errors.js';
import { checkPayloadBytes, MAX_SQS_BODY_BYTES } from '../../../kernel/limits.js';
import { envelopeBody } from '../../../messaging/envelope.js';
import type { OutboxRecord } from '../../../outbox/types.js';
import { recordFromItem } from '../dynamodb/outbox.js';

/** Options of {@link OutboxRelay}. */
export interface OutboxRelayOptions {
  readonly sqs: SQSClient;
  /** Topic → the queue URLs of the consumer groups subscribed to it. */
  readonly routes: Readonly<Record<string, readonly string[]>>;
  /**
   * Largest SQS message body, in bytes; a larger record is refused (a batch item failure).
   * @default 262144 (`MAX_SQS_BODY_BYTES`)
   */
  readonly maxMessageBytes?: number;
  /**
   * Largest `SendMessageBatch` request, in bytes.
   * @default 262144
   */
  readonly maxBatchBytes?: number;
  /**
   * Called for every record the relay cannot send (a `MessageFormatError` for a row it
   * cannot read, a `LimitExceededError` for a body over `maxMessageBytes`): such a record is
   * also returned in `batchItemFailures`, never skipped.
   * @default console.error
   */
  readonly onRefused?: (error: LambdacableError, sequenceNumber: string | undefined) => void;
}

interface Entry {
  readonly index: number;
  readonly record: OutboxRecord;
  readonly body: string;
  readonly groupId: string;
  readonly dedupId: string;
}

/** Options of one {@link OutboxRelay.relay} call. */
export interface RelayCallOptions {
  /** The records are a replay of a batch the relay gave up (`relay:replay`). */
  readonly replayed?: boolean;
}

/** What one relay call did. */
export interface RelayResult extends DynamoDBBatchResponse {
  readonly sent: number;
  /** Records it cannot send (see `onRefused`); the first failure it returns may be one. */
  readonly refused: number;
  /** The sequence numbers of the refused records, in stream order. */
  readonly refusedSequenceNumbers: readonly string[];
}

const BATCH_ENTRIES = 10;

/** Prefix of a hashed {@link messageGroupId}; a raw key that starts with it is hashed too. */
export const HASHED_ID_PREFIX = '~sha256:';

// SQS: 1–128 characters, each ASCII alphanumeric or punctuation (0x21–0x7E).
const SQS_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The SQS `MessageGroupId` of an event key, which consumers see as the message
 * `partition`: the key itself when SQS accepts it (1–128 ASCII characters from `!` to
 * `~`, not starting with `~sha256:`), else `~sha256:` + the SHA-256 (hex) of its UTF-8
 * bytes. One key always gets the same id (per-key order holds), and as a key that starts
 * with the prefix is always hashed, a kept key never equals a hashed one.
 */
export function messageGroupId(key: string): string {
  return sqsId(key);
}

/**
 * The SQS `MessageDeduplicationId` of an event id: the same mapping as
 * {@link messageGroupId}. Ids from `newEventId` (28 hex digits) are kept as they are;
 * foreign writers' ids that SQS would refuse are hashed.
 */
export function deduplicationId(eventId: string): string {
  return sqsId(eventId);
}

function sqsId(value: string): string {
  if (SQS_ID.test(value) && !value.startsWith(HASHED_ID_PREFIX)) return value;
  return HASHED_ID_PREFIX + createHash('sha256').update(value, 'utf8').digest('hex');
}

/**
 * Relays outbox stream records to SQS FIFO queues (`MessageGroupId` =
 * {@link messageGroupId} of the key, `MessageDeduplicationId` = {@link deduplicationId} of
 * the event id, body = envelope with the stream sequence number as
 * offset). Records are sent in order; on a failure, `batchItemFailures` names the first
 * failed record so Lambda retries from there (what was sent again is deduplicated).
 *
 * A record it can never send (a row it cannot read, a body over the SQS limit, which only a
 * foreign writer can commit: every producer of this library refuses it before commit) is
 * refused: `onRefused` is called and the record is a batch item failure like a failed send,
 * so Lambda retries it and, after `maximumRetryAttempts`, hands the batch to the
 * `relay-failures` destination (`npm run relay:replay`). The records after it are still sent.
 */
export class OutboxRelay {
  private readonly maxMessageBytes: number;
  private readonly maxBatchBytes: number;
  private readonly onRefused: (error: LambdacableError, sequenceNumber: string | undefined) => void;

  constructor(private readonly options: OutboxRelayOptions) {
    this.maxMessageBytes = options.maxMessageBytes ?? MAX_SQS_BODY_BYTES;
    this.maxBatchBytes = options.maxBatchBytes ?? 262_144;
    this.onRefused =
      options.onRefused ??
      ((error, seq) => console.error(`outbox relay refused record ${seq}: ${error.message}`));
  }

  /**
   * Relays `records` (one Lambda stream batch) and says which to retry. `replayed` marks
   * the envelopes as sent again by `relay:replay` (the envelope's `replayed`).
   */
  async relay(
    records: readonly DynamoDBRecord[],
    options: RelayCallOptions = {},
  ): Promise<RelayResult> {
    const byQueue = new Map<string, Entry[]>();
    const refused: { index: number; seq: string }[] = [];
    records.forEach((r, index) => {
      // TTL deletes and anything but inserts are not events.
      if (r.eventName !== 'INSERT' || !r.dynamodb?.NewImage) return;
      const seq = r.dynamodb.SequenceNumber;
      let record: OutboxRecord;
      let body: string;
      try {
        record = recordFromItem(r.dynamodb.NewImage as Record<string, AttributeValue>);
        body = envelopeBody(record, BigInt(seq ?? '0'), { replayed: options.replayed === true });
        checkPayloadBytes(
          `SQS body of ${record.type || 'message'} ${record.id}`,
          Buffer.byteLength(body),
          this.maxMessageBytes,
          'maxMessageBytes',
        );
      } catch (error) {
        refused.push({ index, seq: seq ?? '' });
        this.onRefused(asRefusal(error), seq);
        return;
      }
      for (const url of this.options.routes[record.topic] ?? []) {
        const list = byQueue.get(url) ?? [];
        list.push({
          index,
          record,
          body,
          groupId: messageGroupId(record.key),
          dedupId: deduplicationId(record.id),
        });
        byQueue.set(url, list);
      }
    });

    const results = await Promise.all(
      [...byQueue].map(([url, entries]) => this.sendAll(url, entries)),
    );
    const firstFailed = Math.min(
      ...results.map((r) => r.firstFailed),
      ...refused.map((r) => r.index),
    );
    const sent = results.reduce((n, r) => n + r.sent, 0);
    const counts = {
      sent,
      refused: refused.length,
      refusedSequenceNumbers: refused.map((r) => r.seq),
    };
    if (!Number.isFinite(firstFailed)) return { batchItemFailures: [], ...counts };
    const seq = records[firstFailed]?.dynamodb?.SequenceNumber ?? '';
    return { batchItemFailures: [{ itemIdentifier: seq }], ...counts };
  }

  private async sendAll(
    url: string,
    entries: readonly Entry[],
  ): Promise<{ firstFailed: number; sent: number }> {
    let sent = 0;
    for (const batch of this.batches(entries)) {
      let failedIds: Set<string>;
      try {
        const out = await this.options.sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: url,
            Entries: batch.map((e) => ({
              Id: `e${e.index}`,
              MessageBody: e.body,
              MessageGroupId: e.groupId,
              MessageDeduplicationId: e.dedupId,
            })),
          }),
        );
        failedIds = new Set((out.Failed ?? []).map((f) => f.Id ?? ''));
        for (const f of out.Failed ?? []) {
          console.error(`SendMessageBatch to ${url}: entry ${f.Id} failed: ${f.Code} ${f.Message}`);
        }
      } catch (error) {
        console.error(`SendMessageBatch to ${url} failed`, error);
        return { firstFailed: batch[0]!.index, sent };
      }
      const failed = batch.find((e) => failedIds.has(`e${e.index}`));
      if (failed) return { firstFailed: failed.index, sent: sent + batch.indexOf(failed) };
      sent += batch.length;
    }
    return { firstFailed: Number.POSITIVE_INFINITY, sent };
  }

  /**
   * Splits entries, in order, into requests of at most 10 entries and `maxBatchBytes`,
   * with at most one entry per message group: were a later entry of a group accepted
   * while an earlier one failed, the retry would land behind it and break the order.
   */
  private *batches(entries: readonly Entry[]): Generator<Entry[]> {
    let batch: Entry[] = [];
    let bytes = 0;
    let groups = new Set<string>();
    for (const e of entries) {
      const size = Buffer.byteLength(e.body) + e.groupId.length + e.dedupId.length;
      if (
        batch.length === BATCH_ENTRIES ||
        bytes + size > this.maxBatchBytes ||
        groups.has(e.groupId)
      ) {
        if (batch.length > 0) yield batch;
        batch = [];
        bytes = 0;
        groups = new Set();
      }
      batch.push(e);
      bytes += size;
      groups.add(e.groupId);
    }
    if (batch.length > 0) yield batch;
  }
}

/** What the relay reports for a record it cannot send. */
function asRefusal(error: unknown): LambdacableError {
  if (error instanceof LimitExceededError || error instanceof MessageFormatError) return error;
  return new MessageFormatError(`outbox row cannot be relayed: ${(error as Error).message}`, {
    cause: error,
  });
}
