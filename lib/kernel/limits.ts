import { createHash } from 'node:crypto';
import { LimitExceededError } from './errors.js';

// Every user-supplied value that becomes a DynamoDB key (or a frame API Gateway must
// carry) has one of these limits, in UTF-8 bytes. DynamoDB allows 2048 bytes for a
// partition key and 1024 for a sort key; the subscription sort key is
// `s#<stream>#<identifier>`, so 3 + MAX_STREAM_BYTES + MAX_IDENTIFIER_BYTES <= 1024.

/** Longest stream name (history `pk`, the `byStream` index key, part of the subscription `sk`). */
export const MAX_STREAM_BYTES = 256;
/**
 * Longest channel identifier (part of the subscription `sk`). A signed name of a
 * {@link MAX_STREAM_BYTES} ASCII stream makes an identifier of about 460 bytes.
 */
export const MAX_IDENTIFIER_BYTES = 760;
/** Longest `sid` a client may send to restore a session (the sessions `pk`); ours are UUIDs. */
export const MAX_SID_BYTES = 128;
/** Longest identity a connect token may carry (the `byIdentity` index key). */
export const MAX_IDENTITY_BYTES = 1024;
/** Longest connection id (the connections `pk` is `c#<id>`); API Gateway's are 16 characters. */
export const MAX_CONNECTION_ID_BYTES = 1024;
/**
 * Largest broadcast `data`, and its JSON as sent to clients: with the frame around it
 * (identifier, stream, epoch, offset) it stays under API Gateway's 128 KB per WebSocket
 * message, and its SQS envelope (Avro, base64) under the relay's 256 KiB.
 */
export const MAX_BROADCAST_DATA_BYTES = 96 * 1024;
/** Largest `POST /_broadcast` body. */
export const MAX_BROADCAST_BODY_BYTES = 256 * 1024;
/**
 * Most items (broadcasts and remote commands) in one `POST /_broadcast`: each is an outbox
 * write and a relayed message; a caller with more sends more requests.
 */
export const MAX_BROADCAST_ITEMS = 100;
/**
 * Longest `Idempotency-Key` of a `POST /_broadcast`, in characters (visible ASCII): a UUID is
 * 36; a longer key is refused (400) rather than cut.
 */
export const MAX_IDEMPOTENCY_KEY_CHARS = 255;
/**
 * Seconds an outbox row is kept by default (TTL from its `createdAt`): two days, longer than
 * the DynamoDB Stream's 24 h. Also the longest `LAMBDACABLE_IDEMPOTENCY_TTL`: a retry with an
 * `Idempotency-Key` finds what its first attempt wrote by those rows, so they must outlive
 * the key.
 */
export const OUTBOX_RETENTION_SECONDS = 172_800;
/**
 * Largest SQS message body the relay sends (SQS FIFO's 256 KiB). Every producer checks an
 * event's body as the relay would encode it ({@link MAX_ENVELOPE_OFFSET}), before commit.
 */
export const MAX_SQS_BODY_BYTES = 262_144;
/**
 * The largest offset an envelope can carry: a DynamoDB Stream sequence number has at most 40
 * digits. Producers size a body with it, so a record they accept fits whatever its offset.
 */
export const MAX_ENVELOPE_OFFSET = 10n ** 40n - 1n;

/** The most characters of client-controlled text a log entry carries per field. */
export const MAX_LOGGED_CHARS = 200;

/**
 * `value` cut to {@link MAX_LOGGED_CHARS} characters for a log entry, with how long it was,
 * so a client cannot write kilobytes into the logs per frame.
 */
export function clipForLog(value: string): string;
export function clipForLog(value: string | undefined): string | undefined;
export function clipForLog(value: string | undefined): string | undefined {
  if (value === undefined || value.length <= MAX_LOGGED_CHARS) return value;
  return `${value.slice(0, MAX_LOGGED_CHARS)}… (${utf8Bytes(value)} bytes)`;
}

/** UTF-8 length of `value`. */
export function utf8Bytes(value: string): number {
  return Buffer.byteLength(value, 'utf8');
}

/** Throws {@link LimitExceededError} (`kind: 'payload'`) when `bytes` is over `limit`. */
export function checkPayloadBytes(what: string, bytes: number, limit: number, why = ''): void {
  if (bytes > limit) {
    throw new LimitExceededError(
      `${what} is ${bytes} bytes, the limit is ${limit}${why ? ` (${why})` : ''}`,
      { what, bytes, limit, kind: 'payload' },
    );
  }
}

/** Throws {@link LimitExceededError} (`kind: 'key'`) when `value` is over `limit` bytes. */
export function checkKeyBytes(what: string, value: string, limit: number): void {
  const bytes = utf8Bytes(value);
  if (bytes > limit) {
    throw new LimitExceededError(`${what} is ${bytes} bytes, the limit is ${limit} (UTF-8)`, {
      what,
      bytes,
      limit,
      kind: 'key',
    });
  }
}

/** A short, stable fingerprint of a secret-ish value (a sid, a signed name) for logs. */
export function fingerprint(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 12);
}
