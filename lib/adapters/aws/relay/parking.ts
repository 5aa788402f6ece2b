import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { MessageFormatError } from '../../../kernel/errors.js';
import { MAX_SQS_BODY_BYTES } from '../../../kernel/limits.js';
import { awsCall } from '../call.js';

/** The marker field of a parked record's body in the relay-failures queue. */
export const PARKED_RECORD_KIND = 'lambdacable.parked-outbox-record';

/**
 * An outbox stream record the relay can never send as it is (a row it cannot read, a body
 * over the SQS limit, an entry SQS refused with `SenderFault`), parked so that its shard goes
 * on: the stream record's keys and sequence number, the outbox item itself when it fits in
 * an SQS message, and why. `npm run relay:replay` sends it again.
 */
export interface ParkedRelayRecord {
  readonly kind: typeof PARKED_RECORD_KIND;
  /** The stream record's sequence number: the offset it is relayed with. */
  readonly sequenceNumber: string;
  /** The outbox stream (the record's `eventSourceARN`), when known. */
  readonly streamArn: string | undefined;
  /** The outbox item's key. */
  readonly keys: { readonly pk: string; readonly sk: string };
  /**
   * The outbox item (the record's `NewImage`, DynamoDB JSON); absent when it would not fit
   * in the parking message: the replay then reads it from the outbox table.
   */
  readonly item: Record<string, AttributeValue> | undefined;
  /** The queue that refused it (a `SenderFault` entry); absent when the relay refused it. */
  readonly queueUrl: string | undefined;
  readonly error: { readonly name: string; readonly code: string; readonly message: string };
  /** ISO 8601. */
  readonly parkedAt: string;
}

/** Where the relay parks a record ({@link ParkedRelayRecord}). */
export interface RelayParking {
  /** Stores `record` durably; rejects when it could not (the relay then retries the record). */
  park(record: ParkedRelayRecord): Promise<void>;
}

// Room for the message attributes SQS counts in the size, and for the JSON escaping.
const PARK_BODY_LIMIT = MAX_SQS_BODY_BYTES - 4_096;

/**
 * The body of a parked record's message: JSON with the item; without it (`item` absent) when
 * that would exceed the SQS limit.
 */
export function parkedRecordBody(record: ParkedRelayRecord): string {
  const body = JSON.stringify(record, binaryAsBase64);
  if (Buffer.byteLength(body) <= PARK_BODY_LIMIT) return body;
  return JSON.stringify({ ...record, item: undefined });
}

/**
 * Binary attributes as a Lambda event carries them, base64 strings: the SDK's stream reader
 * (the local poller) hands bytes, which JSON would turn into an object of indices.
 */
function binaryAsBase64(_key: string, value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  // Buffer's own toJSON runs before a replacer.
  const json = value as { type?: unknown; data?: unknown } | null;
  if (json?.type === 'Buffer' && Array.isArray(json.data)) {
    return Buffer.from(json.data as number[]).toString('base64');
  }
  return value;
}

/** Whether a relay-failures message body is a parked record (not a Lambda failure record). */
export function isParkedRecordBody(body: string): boolean {
  return body.includes(PARKED_RECORD_KIND) && parseParkedRecordOrUndefined(body) !== undefined;
}

/** Reads a parked record's body; throws {@link MessageFormatError} when it is not one. */
export function parseParkedRecord(body: string): ParkedRelayRecord {
  const parked = parseParkedRecordOrUndefined(body);
  if (!parked) {
    throw new MessageFormatError(
      `not a parked outbox record (kind ${PARKED_RECORD_KIND}, sequenceNumber, keys pk and sk): ${body.slice(0, 300)}`,
    );
  }
  return parked;
}

function parseParkedRecordOrUndefined(body: string): ParkedRelayRecord | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return undefined;
  }
  const r = (json ?? {}) as Partial<ParkedRelayRecord>;
  if (
    r.kind !== PARKED_RECORD_KIND ||
    typeof r.sequenceNumber !== 'string' ||
    !/^\d{1,40}$/.test(r.sequenceNumber) ||
    typeof r.keys?.pk !== 'string' ||
    typeof r.keys.sk !== 'string'
  ) {
    return undefined;
  }
  return {
    kind: PARKED_RECORD_KIND,
    sequenceNumber: r.sequenceNumber,
    streamArn: typeof r.streamArn === 'string' ? r.streamArn : undefined,
    keys: { pk: r.keys.pk, sk: r.keys.sk },
    item: r.item && typeof r.item === 'object' ? r.item : undefined,
    queueUrl: typeof r.queueUrl === 'string' ? r.queueUrl : undefined,
    error: {
      name: String(r.error?.name ?? ''),
      code: String(r.error?.code ?? ''),
      message: String(r.error?.message ?? ''),
    },
    parkedAt: String(r.parkedAt ?? ''),
  };
}

/** Parks relay records in the `relay-failures` queue, beside Lambda's failure records. */
export class SqsRelayParking implements RelayParking {
  constructor(private readonly options: { readonly sqs: SQSClient; readonly queueUrl: string }) {}

  async park(record: ParkedRelayRecord): Promise<void> {
    const { sqs, queueUrl } = this.options;
    await awsCall('SendMessage', queueUrl, [record.sequenceNumber], () =>
      sqs.send(
        new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: parkedRecordBody(record) }),
      ),
    );
  }
}
