import { createHash } from 'node:crypto';
import { LambdacableError } from '../../kernel/errors.js';
import type { BroadcastRequestItem } from './http-request.js';
import type { ItemOrigin } from './ordered-disconnect.js';

/**
 * The event ids of a request's messages under an `Idempotency-Key`, the same on every attempt
 * of the request: `base` (the first attempt's, from a `RequestIdStore`), the index of the
 * request item the message comes from (4 hex digits), then `1` for the item itself, or `0`
 * and the SHA-256 of the message key for an `unsubscribe` added before a remote `disconnect`
 * (one per stream). So a retry gives each message the id it had, also when the disconnect's
 * target holds other streams by then (their `unsubscribe`s get ids of their own), and the ids
 * of one key sort in the request's order, as `OutboxProducer.publishAll` needs. `origins[i]`
 * is where `messages[i]` comes from (`withOrderedDisconnects`).
 */
export function requestEventIds(
  base: string,
  messages: readonly { readonly key: string }[],
  origins: readonly ItemOrigin[],
): string[] {
  if (origins.length !== messages.length) {
    throw new LambdacableError(
      `${messages.length} messages but ${origins.length} origins: one origin per message expected`,
    );
  }
  return messages.map((message, i) => {
    const origin = origins[i]!;
    // A request holds at most MAX_BROADCAST_ITEMS (100) items: 4 hex digits keep their order.
    const index = origin.index.toString(16).padStart(4, '0');
    return origin.added ? `${base}${index}0${sha256(message.key)}` : `${base}${index}1`;
  });
}

/** The SHA-256 of a request's items as parsed (not as expanded): what a retry must match. */
export function requestFingerprint(items: readonly BroadcastRequestItem[]): string {
  return sha256(JSON.stringify(items));
}

function sha256(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}
