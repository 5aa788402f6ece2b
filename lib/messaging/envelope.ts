import { MessageFormatError } from '../kernel/errors.js';
import { checkPayloadBytes, MAX_ENVELOPE_OFFSET, MAX_SQS_BODY_BYTES } from '../kernel/limits.js';
import type { OutboxRecord } from '../outbox/types.js';

/** What the relay puts in an SQS message body: the outbox record plus its offset. */
export interface Envelope extends OutboxRecord {
  /** The outbox stream sequence number: one increasing sequence per partition. */
  readonly offset: bigint;
  /**
   * Sent again by `relay:replay` after the relay gave its batch up: the key may have gone
   * on, so a consumer with an ack store handles it even at or below its ack level (at least
   * once; deduplicate by `id`).
   */
  readonly replayed?: boolean;
}

/** The SQS body of `record` at `offset`: JSON with the payload in base64. */
export function encodeEnvelope(
  record: OutboxRecord,
  offset: bigint,
  options: { readonly replayed?: boolean } = {},
): string {
  return JSON.stringify({
    v: 1,
    id: record.id,
    topic: record.topic,
    key: record.key,
    type: record.type,
    headers: record.headers,
    timestamp: record.timestamp,
    offset: offset.toString(),
    payload: Buffer.from(record.payload).toString('base64'),
    ...(options.replayed ? { replayed: true } : {}),
  });
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

/** The exact SQS body the relay sends for `record` at `offset`: the envelope, in ASCII. */
export function envelopeBody(
  record: OutboxRecord,
  offset: bigint,
  options: { readonly replayed?: boolean } = {},
): string {
  return asciiJson(encodeEnvelope(record, offset, options));
}

const NO_PAYLOAD = new Uint8Array(0);

/**
 * Bytes of {@link envelopeBody} for `record` (ASCII, so bytes = characters), by default at
 * {@link MAX_ENVELOPE_OFFSET} and marked replayed: the largest body the record can ever get,
 * whatever offset the stream gives it and also when `relay:replay` sends it. The payload is counted as its base64 length, not encoded.
 */
export function sqsBodyBytes(record: OutboxRecord, offset: bigint = MAX_ENVELOPE_OFFSET): number {
  // Base64 needs no JSON escape: the body is the envelope around an empty payload plus it.
  // Measured as a replay sends it (`"replayed":true`), the longer of the two.
  const frame = envelopeBody({ ...record, payload: NO_PAYLOAD }, offset, { replayed: true }).length;
  return frame + 4 * Math.ceil(record.payload.length / 3);
}

/**
 * Throws {@link LimitExceededError} (`kind: 'payload'`) when the body the relay would send
 * for `record` (at the largest offset) is over {@link MAX_SQS_BODY_BYTES}: such a record
 * could be committed but never sent.
 */
export function checkSqsBody(record: OutboxRecord, limit = MAX_SQS_BODY_BYTES): void {
  checkPayloadBytes(
    `SQS body of ${record.type || 'message'} ${record.id}`,
    sqsBodyBytes(record),
    limit,
    'MAX_SQS_BODY_BYTES: the envelope carries the payload in base64',
  );
}

/**
 * Parses an SQS body; throws {@link MessageFormatError} for anything that is not an envelope,
 * or whose offset is over {@link MAX_ENVELOPE_OFFSET}.
 */
export function decodeEnvelope(body: string, messageId?: string): Envelope {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (cause) {
    throw new MessageFormatError(`message body is not JSON: ${body.slice(0, 40)}`, {
      messageId,
      cause,
    });
  }
  const e = raw as Record<string, unknown>;
  if (
    typeof raw !== 'object' ||
    raw === null ||
    e.v !== 1 ||
    typeof e.id !== 'string' ||
    typeof e.topic !== 'string' ||
    typeof e.key !== 'string' ||
    typeof e.payload !== 'string' ||
    typeof e.offset !== 'string' ||
    !/^\d+$/.test(e.offset)
  ) {
    throw new MessageFormatError(
      'message body is not a lambdacable envelope: expected v, id, topic, key, offset, payload',
      { messageId },
    );
  }
  const offset = BigInt(e.offset);
  // Past what a stream sequence number can be: no relay sent it.
  if (offset > MAX_ENVELOPE_OFFSET) {
    throw new MessageFormatError(
      `envelope offset has more than 40 digits: ${e.offset.slice(0, 60)}, the largest is MAX_ENVELOPE_OFFSET`,
      { messageId },
    );
  }
  return {
    id: e.id,
    topic: e.topic,
    key: e.key,
    type: typeof e.type === 'string' ? e.type : '',
    headers: (e.headers as Record<string, string> | undefined) ?? {},
    timestamp: typeof e.timestamp === 'number' ? e.timestamp : 0,
    offset,
    payload: new Uint8Array(Buffer.from(e.payload, 'base64')),
    ...(e.replayed === true ? { replayed: true } : {}),
  };
}
