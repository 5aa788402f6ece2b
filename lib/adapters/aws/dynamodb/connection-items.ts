/** Items of the `connections` table and the records they hold. */
import type { ConnectionChange, ConnectionRecord, Subscription } from '../../../realtime/ports.js';

/**
 * The sort key of a subscription item: `s#<stream>`, one per stream per connection (the
 * identifier that holds it is an attribute).
 */
export function subscriptionKey(stream: string): string {
  return `s#${stream}`;
}

/**
 * The sort key subscriptions had before one stream meant one subscription per connection:
 * `s#<stream>#<identifier>`. Items under it live until their connection ends (3 h at most),
 * are read and removed like the others, but are not counted against the limit.
 */
export function legacySubscriptionKey(stream: string, identifier: string): string {
  return `s#${stream}#${identifier}`;
}

/** A connection item (`sk` `c`), unmarshalled, as a record. */
export function toConnection(row: Record<string, unknown>): ConnectionRecord {
  return {
    connectionId: String(row.connectionId),
    identity: typeof row.identity === 'string' ? row.identity : '',
    sid: String(row.sid ?? ''),
    protocol: String(row.protocol ?? ''),
    connectedAt: Number(row.connectedAt ?? 0),
    ...(typeof row.endpoint === 'string' ? { endpoint: row.endpoint } : {}),
    ...(row.refusal === 'token_expired' || row.refusal === 'unauthorized'
      ? { refusal: row.refusal }
      : {}),
    ...(typeof row.pingInterval === 'number' ? { pingInterval: row.pingInterval } : {}),
  };
}

/** A subscription item, unmarshalled, as a subscription. */
export function toSubscription(row: Record<string, unknown>): Subscription {
  return {
    connectionId: String(row.connectionId),
    stream: String(row.stream),
    identifier: String(row.identifier),
    whisper: row.whisper === true,
    ...(typeof row.endpoint === 'string' ? { endpoint: row.endpoint } : {}),
    ...(typeof row.subscribedAt === 'number' ? { subscribedAt: row.subscribedAt } : {}),
  };
}

/** An item of {@link BUCKET_INDEX}: the connection item (`sk` `c`) or a subscription. */
export function toChange(row: Record<string, unknown>): ConnectionChange {
  const changedAt = Number(row.since ?? 0);
  return row.sk === 'c'
    ? { kind: 'connection', connection: toConnection(row), changedAt }
    : { kind: 'subscription', subscription: toSubscription(row), changedAt };
}
