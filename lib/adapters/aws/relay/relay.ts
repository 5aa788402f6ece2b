import { createHash } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';
import {
  AwsResourceError,
  errorMessage,
  type LambdacableError,
  LimitExceededError,
  MessageFormatError,
} from '../../../kernel/errors.js';
import { checkPayloadBytes, MAX_SQS_BODY_BYTES } from '../../../kernel/limits.js';
import { envelopeBody } from '../../../messaging/envelope.js';
import { classifyBatchEntry, RELAY_RETRY_DELAYS_MS } from '../../../messaging/failures.js';
import type { OutboxRecord } from '../../../outbox/types.js';
import { recordFromItem } from '../dynamodb/outbox.js';
import { PARKED_RECORD_KIND, type RelayParking } from './parking.js';

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
   * Called for every record the relay can never send as it is (a `MessageFormatError` for a
   * row it cannot read, a `LimitExceededError` for a body over `maxMessageBytes`, an
   * `AwsResourceError` for an entry SQS refused with `SenderFault`): such a record is parked
   * (see `parking`) or else returned in `batchItemFailures`, never skipped.
   * @default console.error
   */
  readonly onRefused?: (error: LambdacableError, sequenceNumber: string | undefined) => void;
  /**
   * Where a refused record goes so that its shard goes on (`SqsRelayParking`: the
   * relay-failures queue, which `relay:replay` reads). Without it, or when parking fails, a
   * refused record is a batch item failure (Lambda retries it, then gives the batch up).
   * @default none
   */
  readonly parking?: RelayParking;
  /**
   * Delays, in ms, between the tries of a send that failed transiently (throttling, a 5xx,
   * a timeout, an entry failed without `SenderFault`), within one call; after the last the
   * record is a batch item failure.
   * @default RELAY_RETRY_DELAYS_MS (250, 500, 1,000, 2,000, 4,000)
   */
  readonly retryDelaysMs?: readonly number[];
  /** @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
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
  /**
   * The records are a replay (`relay:replay`): the envelopes say so, and a refused record is
   * reported (a batch item failure), never parked again.
   */
  readonly replayed?: boolean;
}

/** What one relay call did. */
export interface RelayResult extends DynamoDBBatchResponse {
  readonly sent: number;
  /** Records it cannot send (see `onRefused`); the first failure it returns may be one. */
  readonly refused: number;
  /** The sequence numbers of the refused records, in stream order. */
  readonly refusedSequenceNumbers: readonly string[];
  /** Refused records parked (see `parking`): not failures, the batch went on past them. */
  readonly parked: number;
}

/** A record the relay can never send as it is. */
interface Refusal {
  readonly index: number;
  readonly error: LambdacableError;
  /** The queue that refused it; undefined when the relay did. */
  readonly queueUrl?: string;
  readonly code?: string;
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
 * offset). Records are sent in order; a send that fails transiently (throttling, a 5xx, an
 * entry failed without `SenderFault`) is tried again after each of `retryDelaysMs`, then
 * `batchItemFailures` names the first failed record so Lambda retries from there (what was
 * sent again is deduplicated).
 *
 * A record it can never send as it is (a row it cannot read or a body over the SQS limit,
 * which only a foreign writer can commit: every producer of this library refuses it before
 * commit; an entry SQS refuses with `SenderFault`) is refused: `onRefused` is called, and
 * the record is parked (`parking`, the relay-failures queue, with its outbox item) and the
 * batch goes on, counted in `refused` and `parked`. Its key's later records are sent: they
 * overtake it, and `relay:replay` sends it again later, flagged `replayed`. Without
 * `parking`, or when parking fails, a refused record is a batch item failure like a failed
 * send (Lambda retries it and, after `maximumRetryAttempts`, hands the batch to
 * `relay-failures`). Nothing is skipped silently.
 */
export class OutboxRelay {
  private readonly maxMessageBytes: number;
  private readonly maxBatchBytes: number;
  private readonly onRefused: (error: LambdacableError, sequenceNumber: string | undefined) => void;
  private readonly retryDelaysMs: readonly number[];
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly options: OutboxRelayOptions) {
    this.maxMessageBytes = options.maxMessageBytes ?? MAX_SQS_BODY_BYTES;
    this.maxBatchBytes = options.maxBatchBytes ?? 262_144;
    this.onRefused =
      options.onRefused ??
      ((error, seq) => console.error(`outbox relay refused record ${seq}: ${error.message}`));
    this.retryDelaysMs = options.retryDelaysMs ?? RELAY_RETRY_DELAYS_MS;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
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
    const unreadable: Refusal[] = [];
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
        unreadable.push({ index, error: asRefusal(error) });
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

    // A replay reports what it cannot send; parking it again would only copy it.
    const park = options.replayed === true ? undefined : this.options.parking;
    const settle = async (refusal: Refusal): Promise<boolean> => {
      const seq = records[refusal.index]?.dynamodb?.SequenceNumber;
      this.onRefused(refusal.error, seq);
      if (!park) return false;
      try {
        await park.park(parkedRecord(records[refusal.index]!, refusal));
        return true;
      } catch (error) {
        console.error(`outbox relay could not park record ${seq}, it is retried`, error);
        return false;
      }
    };
    const [parkedUnreadable, results] = await Promise.all([
      Promise.all(unreadable.map(settle)),
      Promise.all([...byQueue].map(([url, entries]) => this.sendAll(url, entries, settle))),
    ]);
    const refusals = [
      ...unreadable.map((r, i) => ({ index: r.index, parked: parkedUnreadable[i]! })),
      ...results.flatMap((r) => r.refused),
    ].sort((a, b) => a.index - b.index);
    const firstFailed = Math.min(
      ...results.map((r) => r.firstFailed),
      ...refusals.filter((r) => !r.parked).map((r) => r.index),
    );
    const sent = results.reduce((n, r) => n + r.sent, 0);
    const counts = {
      sent,
      refused: refusals.length,
      refusedSequenceNumbers: refusals.map((r) => records[r.index]?.dynamodb?.SequenceNumber ?? ''),
      parked: refusals.filter((r) => r.parked).length,
    };
    if (!Number.isFinite(firstFailed)) return { batchItemFailures: [], ...counts };
    const seq = records[firstFailed]?.dynamodb?.SequenceNumber ?? '';
    return { batchItemFailures: [{ itemIdentifier: seq }], ...counts };
  }

  /**
   * Sends `entries` to `url` in order, each request tried again after each of
   * `retryDelaysMs` for its entries that failed transiently; an entry refused with
   * `SenderFault` goes to `settle` (parked: done). Returns the first entry that is not done.
   */
  private async sendAll(
    url: string,
    entries: readonly Entry[],
    settle: (refusal: Refusal) => Promise<boolean>,
  ): Promise<{ firstFailed: number; sent: number; refused: { index: number; parked: boolean }[] }> {
    let sent = 0;
    const refused: { index: number; parked: boolean }[] = [];
    for (const batch of this.batches(entries)) {
      let pending = batch;
      for (let attempt = 0; pending.length > 0; attempt++) {
        let failures: { entry: Entry; code: string; message: string; senderFault: boolean }[];
        try {
          const out = await this.options.sqs.send(
            new SendMessageBatchCommand({
              QueueUrl: url,
              Entries: pending.map((e) => ({
                Id: `e${e.index}`,
                MessageBody: e.body,
                MessageGroupId: e.groupId,
                MessageDeduplicationId: e.dedupId,
              })),
            }),
          );
          const byId = new Map(pending.map((e) => [`e${e.index}`, e]));
          failures = (out.Failed ?? []).flatMap((f) => {
            const entry = byId.get(f.Id ?? '');
            if (!entry) return [];
            console.error(
              `SendMessageBatch to ${url}: entry ${f.Id} failed: ${f.Code} ${f.Message}`,
            );
            return [
              {
                entry,
                code: f.Code ?? '',
                message: f.Message ?? '',
                senderFault: classifyBatchEntry(f) === 'permanent',
              },
            ];
          });
        } catch (error) {
          // The request as a whole (throttled, a 5xx, a timeout): nothing says an entry is wrong.
          console.error(`SendMessageBatch to ${url} failed`, error);
          const code = error instanceof Error ? error.name : 'Error';
          failures = pending.map((entry) => ({
            entry,
            code,
            message: errorMessage(error),
            senderFault: false,
          }));
        }
        sent += pending.length - failures.length;
        let stuck = Number.POSITIVE_INFINITY;
        const retry: Entry[] = [];
        for (const f of failures) {
          if (!f.senderFault) {
            retry.push(f.entry);
            continue;
          }
          const error = new AwsResourceError(
            `SQS refused ${f.entry.record.type || 'message'} ${f.entry.record.id} for ${url}: ${f.code} ${f.message}`,
            { resource: url, ids: [f.entry.record.id] },
          );
          const parked = await settle({ index: f.entry.index, error, queueUrl: url, code: f.code });
          refused.push({ index: f.entry.index, parked });
          if (!parked) stuck = Math.min(stuck, f.entry.index);
        }
        const delay = this.retryDelaysMs[attempt];
        if (Number.isFinite(stuck) || (retry.length > 0 && delay === undefined)) {
          return { firstFailed: Math.min(stuck, ...retry.map((e) => e.index)), sent, refused };
        }
        if (retry.length > 0) await this.sleep(delay!);
        pending = retry;
      }
    }
    return { firstFailed: Number.POSITIVE_INFINITY, sent, refused };
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

/** The parking place's copy of a refused record. */
function parkedRecord(r: DynamoDBRecord, refusal: Refusal) {
  const image = (r.dynamodb?.NewImage ?? {}) as Record<string, AttributeValue>;
  return {
    kind: PARKED_RECORD_KIND,
    sequenceNumber: r.dynamodb?.SequenceNumber ?? '',
    streamArn: r.eventSourceARN,
    keys: {
      pk: r.dynamodb?.Keys?.pk?.S ?? image.pk?.S ?? '',
      sk: r.dynamodb?.Keys?.sk?.S ?? image.sk?.S ?? '',
    },
    item: image,
    queueUrl: refusal.queueUrl,
    error: { name: refusal.error.name, code: refusal.code ?? '', message: refusal.error.message },
    parkedAt: new Date().toISOString(),
  } as const;
}

/** What the relay reports for a record it cannot send. */
function asRefusal(error: unknown): LambdacableError {
  if (error instanceof LimitExceededError || error instanceof MessageFormatError) return error;
  return new MessageFormatError(`outbox row cannot be relayed: ${(error as Error).message}`, {
    cause: error,
  });
}
