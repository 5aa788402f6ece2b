import { MessageFormatError } from '../kernel/errors.js';
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

/** Parses an SQS body; throws {@link MessageFormatError} for anything that is not an envelope. */
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
  return {
    id: e.id,
    topic: e.topic,
    key: e.key,
    type: typeof e.type === 'string' ? e.type : '',
    headers: (e.headers as Record<string, string> | undefined) ?? {},
    timestamp: typeof e.timestamp === 'number' ? e.timestamp : 0,
    offset: BigInt(e.offset),
    payload: new Uint8Array(Buffer.from(e.payload, 'base64')),
    ...(e.replayed === true ? { replayed: true } : {}),
  };
}
