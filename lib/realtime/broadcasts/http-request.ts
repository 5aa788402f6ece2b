import { timingSafeEqual } from 'node:crypto';
import { LimitExceededError, MessageFormatError } from '../../kernel/errors.js';
import {
  MAX_BROADCAST_BODY_BYTES,
  MAX_BROADCAST_DATA_BYTES,
  MAX_BROADCAST_ITEMS,
  MAX_IDEMPOTENCY_KEY_CHARS,
  MAX_STREAM_BYTES,
  utf8Bytes,
} from '../../kernel/limits.js';
import { keysOf } from '../../kernel/secrets.js';

import {
  type Broadcast,
  checkBroadcast,
  checkRemoteCommand,
  type RemoteCommand,
} from './events.js';

/** One item of an HTTP broadcast request. */
export type BroadcastRequestItem =
  | { readonly kind: 'broadcast'; readonly broadcast: Broadcast }
  | { readonly kind: 'command'; readonly command: RemoteCommand };

/**
 * Parses an AnyCable broadcast API body: `{"stream","data"}`, `{"command","payload"}` or an
 * array of them. Throws {@link MessageFormatError} naming what is wrong, and
 * {@link LimitExceededError} for a body over {@link MAX_BROADCAST_BODY_BYTES}, a `data` over
 * {@link MAX_BROADCAST_DATA_BYTES} (`kind: 'payload'`) or a stream name over
 * {@link MAX_STREAM_BYTES} (`kind: 'key'`).
 */
export function parseBroadcastRequest(body: string | undefined | null): BroadcastRequestItem[] {
  if (!body) throw new MessageFormatError('empty body: expected {"stream","data"} or an array');
  const bodyBytes = utf8Bytes(body);
  if (bodyBytes > MAX_BROADCAST_BODY_BYTES) {
    throw new LimitExceededError(
      `body is ${bodyBytes} bytes, the limit is ${MAX_BROADCAST_BODY_BYTES}`,
      { what: 'body', bytes: bodyBytes, limit: MAX_BROADCAST_BODY_BYTES, kind: 'payload' },
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new MessageFormatError('body is not JSON');
  }
  const items = Array.isArray(parsed) ? parsed : [parsed];
  if (items.length === 0) throw new MessageFormatError('empty array: nothing to broadcast');
  if (items.length > MAX_BROADCAST_ITEMS) {
    throw new MessageFormatError(
      `${items.length} items, the limit is ${MAX_BROADCAST_ITEMS} per request: send the rest in more requests`,
    );
  }
  return items.map((item, index): BroadcastRequestItem => {
    const at = Array.isArray(parsed) ? ` at index ${index}` : '';
    if (typeof item !== 'object' || item === null) {
      throw new MessageFormatError(`item${at} is not an object`);
    }
    const { stream, data, command, payload } = item as Record<string, unknown>;
    if (typeof command === 'string' && command.length > 0) {
      const remote = { command, payload: JSON.stringify(payload ?? {}) };
      checkRemoteCommand(remote, `item${at}`);
      return { kind: 'command', command: remote };
    }
    if (typeof stream !== 'string' || stream.length === 0) {
      throw new MessageFormatError(`item${at}: "stream" must be a non-empty string`);
    }
    if (typeof data !== 'string') {
      throw new MessageFormatError(`item${at}: "data" must be a string (JSON-encode objects)`);
    }
    checkBroadcast({ stream, data }, `item${at}`);
    return { kind: 'broadcast', broadcast: { stream, data } };
  });
}

/**
 * The `Idempotency-Key` of a `POST /_broadcast`: `undefined` without the header, else the key,
 * 1 to {@link MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters (a UUID fits). Throws
 * {@link MessageFormatError} for anything else (an empty, oversize or non-ASCII key): a key
 * is never cut or rewritten, so two different keys never become one.
 */
export function parseIdempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (header.length > MAX_IDEMPOTENCY_KEY_CHARS) {
    throw new MessageFormatError(
      `Idempotency-Key is ${header.length} characters, the limit is ${MAX_IDEMPOTENCY_KEY_CHARS}`,
    );
  }
  if (!/^[\x21-\x7e]+$/.test(header)) {
    throw new MessageFormatError(
      'Idempotency-Key must be 1 or more visible ASCII characters (no spaces), e.g. a UUID',
    );
  }
  return header;
}

/** Whether an `Authorization` header carries `Bearer <key>`, compared in constant time. */
export function hasBroadcastKey(
  header: string | undefined,
  key: string | readonly (string | undefined)[],
): boolean {
  if (!header) return false;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match?.[1]) return false;
  const given = Buffer.from(match[1]);
  // The current key or, during a rotation, the previous one; an empty key accepts nothing.
  return keysOf(key).some((k) => {
    const expected = Buffer.from(k);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}
