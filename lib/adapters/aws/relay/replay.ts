import { type AttributeValue, type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { DynamoDBRecord } from 'aws-lambda';
import { awsCall } from '../call.js';
import { recordFromItem } from '../dynamodb/outbox.js';
import { parseRelayFailure, type RelayFailure, readShardRange } from './failure-record.js';
import { type RelayInOrderOptions, relayInOrder } from './in-order.js';
import { isParkedRecordBody, type ParkedRelayRecord, parseParkedRecord } from './parking.js';

/** Options of {@link replayRelayFailure}. */
export interface RelayReplayOptions extends RelayInOrderOptions {
  readonly streams: DynamoDBStreamsClient;
  readonly dynamodb: DynamoDBClient;
  /** The outbox table: each named event's item is read from it (consistent `GetItem`). */
  readonly outboxTable: string;
  /**
   * Reads the range and the items and reports them, sends nothing.
   * @default false
   */
  readonly dryRun?: boolean;
}

/** One event a failure record names. */
export interface ReplayedEvent {
  readonly id: string;
  readonly topic: string;
  readonly key: string;
  /** Its stream sequence number: the offset it is relayed with, as the first time. */
  readonly sequenceNumber: string;
}

/** An event the stream names whose outbox item is gone or unreadable. */
export interface MissingEvent {
  readonly pk: string;
  readonly sk: string;
  readonly sequenceNumber: string;
  readonly reason: string;
}

/**
 * What a replay did: `replayed` when every record of the range was read from the stream,
 * every item found in the outbox and every event relayed (only then is the failure record
 * done with); `incomplete` when something is missing or was not sent; `trimmed` when the
 * stream no longer holds the range; `malformed` for a record that names no range;
 * `dry-run` when nothing was sent and all would have been (a dry run that finds something
 * missing is `incomplete`).
 */
export interface RelayReplayReport {
  readonly outcome: 'replayed' | 'incomplete' | 'trimmed' | 'malformed' | 'dry-run';
  /** The failure record; undefined when it is malformed or a parked record. */
  readonly failure: RelayFailure | undefined;
  /** The record the relay parked (refused, `SenderFault`), when the body is one. */
  readonly parked?: ParkedRelayRecord;
  /** The events relayed again (or, in a dry run, that would be), in stream order. */
  readonly replayed: readonly ReplayedEvent[];
  readonly missing: readonly MissingEvent[];
  /** Stream records of the range that are not inserts (TTL deletes): not events. */
  readonly ignored: number;
  /** What is wrong when the outcome is not `replayed`. */
  readonly detail: string | undefined;
}

/**
 * Relays again exactly the committed events a `relay-failures` record names: the shard's
 * records from its start to its end sequence number are read from the DynamoDB stream (the
 * keys and sequence numbers), each event's item from the outbox table, and `relay` sends
 * them as the stream relay did: the same id (`MessageDeduplicationId`), group and offset (the
 * sequence number), in order. Sending twice is harmless: SQS FIFO drops a duplicate id within
 * 5 minutes, and a consumer's ack state or source position drops an offset it has done.
 */
export async function replayRelayFailure(
  failure: RelayFailure,
  options: RelayReplayOptions,
): Promise<RelayReplayReport> {
  const range = await readShardRange(options.streams, {
    streamArn: failure.streamArn,
    shardId: failure.shardId,
    start: failure.startSequenceNumber,
    end: failure.endSequenceNumber,
  });
  const inserts = range.records.filter((r) => r.eventName === 'INSERT');
  const ignored = range.records.length - inserts.length;
  const base = { failure, ignored };
  if (range.trimmed) {
    return { ...base, outcome: 'trimmed', replayed: [], missing: [], detail: range.detail };
  }

  const found: DynamoDBRecord[] = [];
  const events: ReplayedEvent[] = [];
  const missing: MissingEvent[] = [];
  for (const r of inserts) {
    const keys = r.dynamodb?.Keys as Record<string, AttributeValue> | undefined;
    const sequenceNumber = r.dynamodb?.SequenceNumber ?? '';
    const pk = keys?.pk?.S ?? '';
    const sk = keys?.sk?.S ?? '';
    const row = await outboxRow(options, pk, sk);
    if (!row) {
      missing.push({ pk, sk, sequenceNumber, reason: 'not in the outbox table (expired?)' });
      continue;
    }
    try {
      const record = recordFromItem(row);
      events.push({ id: record.id, topic: record.topic, key: record.key, sequenceNumber });
    } catch (error) {
      missing.push({ pk, sk, sequenceNumber, reason: (error as Error).message });
      continue;
    }
    found.push({
      eventName: 'INSERT',
      eventSource: 'aws:dynamodb',
      eventSourceARN: failure.streamArn,
      dynamodb: { Keys: keys, NewImage: row, SequenceNumber: sequenceNumber },
    } as DynamoDBRecord);
  }

  const problems: string[] = [];
  if (!range.complete && range.detail) problems.push(range.detail);
  if (Number.isFinite(failure.batchSize) && range.records.length !== failure.batchSize) {
    problems.push(
      `the record names ${failure.batchSize} stream records, the stream holds ${range.records.length} in the range`,
    );
  }
  if (missing.length > 0) problems.push(`${missing.length} event(s) missing from the outbox`);
  if (options.dryRun) {
    const outcome = problems.length === 0 ? 'dry-run' : 'incomplete';
    return {
      ...base,
      outcome,
      replayed: events,
      missing,
      detail: problems.join('; ') || undefined,
    };
  }

  const sent = await relayInOrder(found, options);
  if (sent.error) problems.push(sent.error);
  return {
    ...base,
    outcome: problems.length === 0 ? 'replayed' : 'incomplete',
    // A record the relay refused was not sent: it is not replayed.
    replayed: events.slice(0, sent.count).filter((e) => !sent.refused.has(e.sequenceNumber)),
    missing,
    detail: problems.length === 0 ? undefined : problems.join('; '),
  };
}

/** Options of {@link replayRelayFailures}. */
export interface ReplayRelayFailuresOptions extends RelayReplayOptions {
  readonly sqs: SQSClient;
  /** The `relay-failures` queue (`<service>-<stage>-relay-failures`). */
  readonly queueUrl: string;
  /**
   * Failure records to take at most.
   * @default all the queue holds
   */
  readonly maxMessages?: number;
  /**
   * Seconds a taken record stays invisible to others; one not replayed is made visible
   * again at once.
   * @default 300
   */
  readonly visibilityTimeout?: number;
  /**
   * Seconds each `ReceiveMessage` waits for a record (long polling).
   * @default 1
   */
  readonly waitSeconds?: number;
  /** Called with each record's report as it is done. */
  readonly onReport?: (report: RelayReplayReport) => void;
}

/**
 * Relays again the one record the relay parked ({@link ParkedRelayRecord}): its outbox item
 * from the parked copy (or, when that left it out for size, from the outbox table), with its
 * sequence number as offset, flagged `replayed`, to every queue of its topic. It is
 * `replayed` when sent; `incomplete` when the item is gone or the relay refuses it again
 * (the record stays in the queue, for a fix and a later run).
 */
export async function replayParkedRecord(
  parked: ParkedRelayRecord,
  options: RelayReplayOptions,
): Promise<RelayReplayReport> {
  const base = { failure: undefined, parked, ignored: 0 };
  const { pk, sk } = parked.keys;
  let item = parked.item;
  if (!item) {
    item = await outboxRow(options, pk, sk);
  }
  const sequenceNumber = parked.sequenceNumber;
  if (!item) {
    const missing = [{ pk, sk, sequenceNumber, reason: 'not in the outbox table (expired?)' }];
    return {
      ...base,
      outcome: 'incomplete',
      replayed: [],
      missing,
      detail: '1 event(s) missing from the outbox',
    };
  }
  let event: ReplayedEvent;
  try {
    const record = recordFromItem(item);
    event = { id: record.id, topic: record.topic, key: record.key, sequenceNumber };
  } catch (error) {
    const missing = [{ pk, sk, sequenceNumber, reason: (error as Error).message }];
    return { ...base, outcome: 'incomplete', replayed: [], missing, detail: missing[0]!.reason };
  }
  if (options.dryRun) {
    return { ...base, outcome: 'dry-run', replayed: [event], missing: [], detail: undefined };
  }
  const record = {
    eventName: 'INSERT',
    eventSource: 'aws:dynamodb',
    ...(parked.streamArn ? { eventSourceARN: parked.streamArn } : {}),
    dynamodb: {
      Keys: { pk: { S: pk }, sk: { S: sk } },
      NewImage: item,
      SequenceNumber: sequenceNumber,
    },
  } as DynamoDBRecord;
  const sent = await relayInOrder([record], options);
  const done = sent.count === 1 && sent.refused.size === 0;
  return {
    ...base,
    outcome: done ? 'replayed' : 'incomplete',
    replayed: done ? [event] : [],
    missing: [],
    detail: done ? undefined : sent.error,
  };
}

/** The report of one failure record's text: malformed, or what its replay did. */
export async function replayBody(
  body: string,
  options: RelayReplayOptions,
): Promise<RelayReplayReport> {
  if (isParkedRecordBody(body)) return replayParkedRecord(parseParkedRecord(body), options);
  let failure: RelayFailure;
  try {
    failure = parseRelayFailure(body);
  } catch (error) {
    return {
      outcome: 'malformed',
      failure: undefined,
      replayed: [],
      missing: [],
      ignored: 0,
      detail: (error as Error).message,
    };
  }
  return replayRelayFailure(failure, options);
}

/**
 * Replays the records of the `relay-failures` queue ({@link replayRelayFailure}) until it
 * is empty; a record is deleted only when every event it names was relayed, any other stays
 * in the queue (made visible again when the run ends) for a later run. Returns one report per record.
 */
export async function replayRelayFailures(
  options: ReplayRelayFailuresOptions,
): Promise<RelayReplayReport[]> {
  const { sqs, queueUrl } = options;
  const max = options.maxMessages ?? Number.POSITIVE_INFINITY;
  const reports: RelayReplayReport[] = [];
  const seen = new Set<string>();
  const kept: { id: string; handle: string }[] = [];
  try {
    while (reports.length < max) {
      const out = await awsCall('ReceiveMessage', queueUrl, [], () =>
        sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: Math.min(10, max - reports.length),
            // Long polling asks every SQS server: an empty answer means an empty queue.
            WaitTimeSeconds: options.waitSeconds ?? 1,
            VisibilityTimeout: options.visibilityTimeout ?? 300,
          }),
        ),
      );
      const messages = (out.Messages ?? []).filter((m) => !seen.has(m.MessageId ?? ''));
      if (messages.length === 0) break;
      for (const m of messages) {
        const id = m.MessageId ?? '';
        seen.add(id);
        const report = await replayBody(m.Body ?? '', options);
        if (report.outcome === 'replayed') {
          await awsCall('DeleteMessage', queueUrl, [id], () =>
            sqs.send(
              new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }),
            ),
          );
        } else {
          kept.push({ id, handle: m.ReceiptHandle ?? '' });
        }
        reports.push(report);
        options.onReport?.(report);
      }
    }
  } finally {
    // What was not replayed goes back for a later run (kept invisible until now, so that
    // this run receives each record once).
    for (const { id, handle } of kept) {
      await awsCall('ChangeMessageVisibility', queueUrl, [id], () =>
        sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: queueUrl,
            ReceiptHandle: handle,
            VisibilityTimeout: 0,
          }),
        ),
      ).catch(() => {});
    }
  }
  return reports;
}

/** The outbox row `pk`/`sk`, read consistently; `undefined` once it is gone (TTL). */
async function outboxRow(
  options: Pick<RelayReplayOptions, 'dynamodb' | 'outboxTable'>,
  pk: string,
  sk: string,
): Promise<Record<string, AttributeValue> | undefined> {
  const out = await awsCall('GetItem', options.outboxTable, [sk], () =>
    options.dynamodb.send(
      new GetItemCommand({
        TableName: options.outboxTable,
        Key: { pk: { S: pk }, sk: { S: sk } },
        ConsistentRead: true,
      }),
    ),
  );
  return out.Item;
}
