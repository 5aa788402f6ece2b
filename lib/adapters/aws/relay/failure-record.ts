import {
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type GetShardIteratorCommandInput,
  type _Record as StreamRecord,
} from '@aws-sdk/client-dynamodb-streams';
import { AwsResourceError, MessageFormatError } from '../../../kernel/errors.js';

/**
 * The record Lambda sends to a DynamoDB stream event source mapping's on-failure
 * destination when it gives a batch up (`MaximumRetryAttempts`, `MaximumRecordAgeInSeconds`):
 * metadata only, the records themselves stay in the stream.
 */
export interface StreamFailureRecord {
  readonly requestContext: {
    readonly requestId: string;
    readonly functionArn: string;
    /** `RetryAttemptsExhausted`, `RecordAgeExceeded`, … */
    readonly condition: string;
    readonly approximateInvokeCount: number;
  };
  readonly responseContext: {
    readonly statusCode: number;
    readonly executedVersion: string;
    readonly functionError?: string;
  };
  readonly version: string;
  /** ISO 8601. */
  readonly timestamp: string;
  readonly DDBStreamBatchInfo: StreamBatchInfo;
}

/** The batch a {@link StreamFailureRecord} names: one shard's records, start to end inclusive. */
export interface StreamBatchInfo {
  readonly shardId: string;
  readonly startSequenceNumber: string;
  readonly endSequenceNumber: string;
  /** ISO 8601, whole seconds. */
  readonly approximateArrivalOfFirstRecord: string;
  readonly approximateArrivalOfLastRecord: string;
  /** Records in the batch. */
  readonly batchSize: number;
  readonly streamArn: string;
}

/** A relay failure: why Lambda gave up, and the batch. */
export interface RelayFailure extends StreamBatchInfo {
  /** `requestContext.condition`, e.g. `RetryAttemptsExhausted`. */
  readonly condition: string;
  /** When Lambda gave up (ISO 8601), if the record says. */
  readonly timestamp: string | undefined;
}

const SEQUENCE = /^\d{1,40}$/;

/**
 * Reads a relay failure from the body of a `relay-failures` message (or any JSON text of
 * that shape); throws {@link MessageFormatError} when it names no shard and sequence range.
 */
export function parseRelayFailure(body: string): RelayFailure {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (cause) {
    throw new MessageFormatError('relay failure record is not JSON', { cause });
  }
  const record = (json ?? {}) as Partial<StreamFailureRecord>;
  const info = (record.DDBStreamBatchInfo ?? {}) as Partial<StreamBatchInfo>;
  const { shardId, startSequenceNumber: start, endSequenceNumber: end, streamArn } = info;
  if (
    typeof shardId !== 'string' ||
    typeof streamArn !== 'string' ||
    typeof start !== 'string' ||
    typeof end !== 'string' ||
    !SEQUENCE.test(start) ||
    !SEQUENCE.test(end) ||
    BigInt(start) > BigInt(end)
  ) {
    throw new MessageFormatError(
      `relay failure record has no DDBStreamBatchInfo with shardId, streamArn and a sequence range start <= end: ${body.slice(0, 300)}`,
    );
  }
  return {
    condition: String(record.requestContext?.condition ?? ''),
    timestamp: typeof record.timestamp === 'string' ? record.timestamp : undefined,
    shardId,
    streamArn,
    startSequenceNumber: start,
    endSequenceNumber: end,
    approximateArrivalOfFirstRecord: String(info.approximateArrivalOfFirstRecord ?? ''),
    approximateArrivalOfLastRecord: String(info.approximateArrivalOfLastRecord ?? ''),
    batchSize: Number(info.batchSize ?? Number.NaN),
  };
}

/**
 * The {@link StreamFailureRecord} Lambda would send for `records`, given up on `shardId`
 * after `invokeCount` invocations: what the local stream poller sends to `relay-failures`.
 */
export function streamFailureRecord(fields: {
  readonly records: readonly {
    dynamodb?: { SequenceNumber?: string; ApproximateCreationDateTime?: number | Date };
  }[];
  readonly shardId: string;
  readonly streamArn: string;
  readonly functionArn: string;
  readonly invokeCount: number;
  /** @default 'RetryAttemptsExhausted' */
  readonly condition?: string;
  readonly requestId: string;
  readonly now: Date;
}): StreamFailureRecord {
  const first = fields.records[0]?.dynamodb;
  const last = fields.records[fields.records.length - 1]?.dynamodb;
  return {
    requestContext: {
      requestId: fields.requestId,
      functionArn: fields.functionArn,
      condition: fields.condition ?? 'RetryAttemptsExhausted',
      approximateInvokeCount: fields.invokeCount,
    },
    responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
    version: '1.0',
    timestamp: fields.now.toISOString(),
    DDBStreamBatchInfo: {
      shardId: fields.shardId,
      startSequenceNumber: first?.SequenceNumber ?? '',
      endSequenceNumber: last?.SequenceNumber ?? '',
      approximateArrivalOfFirstRecord: arrival(first?.ApproximateCreationDateTime, fields.now),
      approximateArrivalOfLastRecord: arrival(last?.ApproximateCreationDateTime, fields.now),
      batchSize: fields.records.length,
      streamArn: fields.streamArn,
    },
  };
}

/** Stream records carry seconds (a number in a Lambda event, a Date from the SDK). */
function arrival(at: number | Date | undefined, fallback: Date): string {
  const date = at instanceof Date ? at : at === undefined ? fallback : new Date(at * 1000);
  return `${date.toISOString().slice(0, 19)}Z`;
}

/** What {@link readShardRange} found. */
export interface ShardRange {
  /** The shard's records from start to end inclusive, in order. */
  readonly records: readonly StreamRecord[];
  /** The whole range was read: its end record was reached, or the shard ended after it. */
  readonly complete: boolean;
  /** The stream no longer holds the range (trimmed after 24 h, or the shard is gone). */
  readonly trimmed: boolean;
  /** Why it is not complete. */
  readonly detail: string | undefined;
}

/** Empty pages in a row after which an open shard is taken to hold nothing more. */
const MAX_EMPTY_PAGES = 20;
const TRIMMED = new Set(['TrimmedDataAccessException', 'ResourceNotFoundException']);

/**
 * Reads the records of one shard from `start` to `end` (sequence numbers, inclusive):
 * `GetShardIterator` AT_SEQUENCE_NUMBER `start`, then `GetRecords` until a record past
 * `end`. A range the stream no longer holds comes back `trimmed`, never as an error; other
 * failures throw {@link AwsResourceError}.
 */
export async function readShardRange(
  streams: DynamoDBStreamsClient,
  range: { streamArn: string; shardId: string; start: string; end: string },
): Promise<ShardRange> {
  const start = BigInt(range.start);
  const end = BigInt(range.end);
  const records: StreamRecord[] = [];
  const fail = (cause: unknown, operation: string): ShardRange => {
    const name = cause instanceof Error ? cause.name : '';
    if (TRIMMED.has(name)) {
      return {
        records,
        complete: false,
        trimmed: true,
        detail: `${operation}: ${name}: the stream no longer holds ${range.shardId} ${range.start}..${range.end}`,
      };
    }
    throw new AwsResourceError(`${operation} on ${range.streamArn} failed: ${name || cause}`, {
      resource: range.streamArn,
      ids: [range.shardId],
      cause,
    });
  };
  const iterator = async (): Promise<string | undefined> => {
    const last = records[records.length - 1]?.dynamodb?.SequenceNumber;
    const at: Partial<GetShardIteratorCommandInput> = last
      ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', SequenceNumber: last }
      : { ShardIteratorType: 'AT_SEQUENCE_NUMBER', SequenceNumber: range.start };
    const out = await streams.send(
      new GetShardIteratorCommand({
        StreamArn: range.streamArn,
        ShardId: range.shardId,
        ...at,
      } as GetShardIteratorCommandInput),
    );
    return out.ShardIterator;
  };

  let next: string | undefined;
  try {
    next = await iterator();
  } catch (error) {
    return fail(error, 'GetShardIterator');
  }
  let empty = 0;
  let renewed = 0;
  while (next) {
    let page: StreamRecord[];
    try {
      const out = await streams.send(new GetRecordsCommand({ ShardIterator: next, Limit: 1000 }));
      page = out.Records ?? [];
      next = out.NextShardIterator;
    } catch (error) {
      // An iterator lives 15 minutes (and DynamoDB Local may expire one early): a new one
      // from where this read is.
      if (error instanceof Error && error.name === 'ExpiredIteratorException' && renewed++ < 5) {
        try {
          next = await iterator();
        } catch (again) {
          return fail(again, 'GetShardIterator');
        }
        continue;
      }
      return fail(error, 'GetRecords');
    }
    empty = page.length === 0 ? empty + 1 : 0;
    for (const r of page) {
      const seq = BigInt(r.dynamodb?.SequenceNumber ?? '0');
      if (seq < start) continue;
      if (seq > end) return { records, complete: true, trimmed: false, detail: undefined };
      records.push(r);
      if (seq === end) return { records, complete: true, trimmed: false, detail: undefined };
    }
    if (empty >= MAX_EMPTY_PAGES) break;
  }
  // A closed shard ended (or an open one had nothing more) before the end record.
  return {
    records,
    complete: false,
    trimmed: false,
    detail: `the shard ${range.shardId} holds no record ${range.end}; read ${records.length} from ${range.start}`,
  };
}
