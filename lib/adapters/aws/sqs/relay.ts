import { createHash } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';
import { encodeEnvelope } from '../../../messaging/envelope.js';
import type { OutboxRecord } from '../../../outbox/types.js';
import { recordFromItem } from '../dynamodb/outbox.js';

/** Options of {@link OutboxRelay}. */
export interface OutboxRelayOptions {
  readonly sqs: SQSClient;
  /** Topic → the queue URLs of the consumer groups subscribed to it. */
  readonly routes: Readonly<Record<string, readonly string[]>>;
  /**
   * Largest SQS message body, in bytes; larger records are logged and skipped.
   * @default 262144
   */
  readonly maxMessageBytes?: number;
  /**
   * Largest `SendMessageBatch` request, in bytes.
   * @default 262144
   */
  readonly maxBatchBytes?: number;
  /** Receives records that can never be delivered. @default console.error */
  readonly onSkipped?: (reason: string, sequenceNumber: string | undefined) => void;
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
  readonly skipped: number;
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

/**
 * `json` with every non-ASCII character as a `\uXXXX` escape: the same JSON value, in
 * characters every SQS accepts. SQS refuses U+FFFE and U+FFFF in a body (and fauxqs
 * everything beyond U+FFFF), which a key or header could carry; a body it refuses would
 * be retried forever and stall the shard.
 */
export function asciiJson(json: string): string {
  return json.replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
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
 */
export class OutboxRelay {
  private readonly maxMessageBytes: number;
  private readonly maxBatchBytes: number;
  private readonly onSkipped: (reason: string, sequenceNumber: string | undefined) => void;

  constructor(private readonly options: OutboxRelayOptions) {
    this.maxMessageBytes = options.maxMessageBytes ?? 262_144;
    this.maxBatchBytes = options.maxBatchBytes ?? 262_144;
    this.onSkipped =
      options.onSkipped ??
      ((reason, seq) => console.error(`outbox relay skipped record ${seq}: ${reason}`));
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
    let skipped = 0;
    records.forEach((r, index) => {
      // TTL deletes and anything but inserts are not events.
      if (r.eventName !== 'INSERT' || !r.dynamodb?.NewImage) return;
      const seq = r.dynamodb.SequenceNumber;
      let record: OutboxRecord;
      try {
        record = recordFromItem(r.dynamodb.NewImage as Record<string, AttributeValue>);
      } catch (error) {
        skipped++;
        this.onSkipped((error as Error).message, seq);
        return;
      }
      const body = asciiJson(
        encodeEnvelope(record, BigInt(seq ?? '0'), { replayed: options.replayed === true }),
      );
      if (Buffer.byteLength(body) > this.maxMessageBytes) {
        skipped++;
        this.onSkipped(
          `message for ${record.id} is ${Buffer.byteLength(body)} bytes, the limit is ${this.maxMessageBytes}`,
          seq,
        );
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
    const firstFailed = Math.min(...results.map((r) => r.firstFailed));
    const sent = results.reduce((n, r) => n + r.sent, 0);
    if (!Number.isFinite(firstFailed)) return { batchItemFailures: [], sent, skipped };
    const seq = records[firstFailed]?.dynamodb?.SequenceNumber ?? '';
    return { batchItemFailures: [{ itemIdentifier: seq }], sent, skipped };
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
