import type { HistoryReader } from '../../broker/types.js';
import { errorMessage, ProtocolError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { resolveStream } from '../auth/streams.js';
import type { GatewayConfig } from '../config.js';
import type { ConnectionRecord, ConnectionStore, PostFrame, Subscription } from '../ports.js';
import { EXT_PROTOCOL, loggedIdentifier, replyFrame } from '../protocol.js';
import { serveHistory } from './history.js';

/** What subscribing uses. */
export interface SubscribeDeps {
  readonly store: ConnectionStore;
  readonly history: HistoryReader;
  readonly config: GatewayConfig;
  readonly logger: Logger;
}

/**
 * `subscribe`: resolves the identifier's stream and stores the subscription, then confirms
 * and serves the history the frame asks for (extended protocol only). Refused with
 * `reject_subscription` and a {@link ProtocolError}: an identifier naming no stream the client
 * may read, a stream this connection holds under another identifier (one stream, one paid
 * copy per connection), and one subscription over `maxSubscriptions`. A repeated subscribe
 * confirms nothing. The cost is the same whatever the connection holds: the session is
 * written when the connection ends, from its subscriptions then (`disconnectConnection`).
 * `endpoint` is the management API endpoint the subscription is stored with.
 */
export async function subscribe(
  deps: SubscribeDeps,
  connection: ConnectionRecord,
  identifier: string,
  history: unknown,
  post: PostFrame,
  endpoint: string | undefined,
): Promise<void> {
  const { store, logger, config } = deps;
  const { connectionId } = connection;
  const reject = async (message: string): Promise<never> => {
    await post(replyFrame('reject_subscription', identifier));
    throw new ProtocolError(`subscription rejected: ${message}`, {
      connectionId,
      command: 'subscribe',
      identifier,
    });
  };
  const resolved = resolveStream(identifier, config);
  if (!resolved.ok) return reject(resolved.refusal.message);
  const sub: Subscription = {
    connectionId,
    identifier,
    stream: resolved.stream,
    whisper: resolved.whisper,
    ...(endpoint ? { endpoint } : {}),
    subscribedAt: Date.now(),
  };
  const added = await store.addSubscription(sub, config.maxSubscriptions);
  switch (added) {
    case 'subscribed':
      // The client re-sends subscribe after 5 s without an answer, while the first one may
      // still be under way in another Lambda. Exactly one call confirms (and serves history):
      // the one that stored the subscription. A second confirm would make the client
      // unsubscribe ("subscription not found"), as AnyCable's clients do.
      logger.info('subscribe: already subscribed, not confirmed again', {
        connectionId,
        identifier: loggedIdentifier(identifier),
      });
      return;
    case 'stream_taken':
      return reject('the connection is subscribed to this stream under another identifier');
    case 'limit':
      return reject(
        `the connection holds ${config.maxSubscriptions} subscriptions, the limit (LAMBDACABLE_MAX_SUBSCRIPTIONS)`,
      );
    case 'gone':
      throw new ProtocolError('unknown connection', { connectionId, command: 'subscribe' });
    case 'added':
      break;
  }
  try {
    await post(replyFrame('confirm_subscription', identifier));
  } catch (error) {
    // Not confirmed: the subscription goes, so that the client's retry starts over.
    await store.removeSubscription(connectionId, sub.stream, identifier).catch((cause: unknown) =>
      logger.error('subscribe: subscription not rolled back', {
        connectionId,
        error: errorMessage(cause),
      }),
    );
    throw error;
  }
  if (history !== undefined && connection.protocol === EXT_PROTOCOL) {
    await serveHistory(deps.history, connectionId, identifier, [sub], history, post);
  }
}

/**
 * The connection's subscription through `identifier`: resolved to its stream and read by
 * key (one read), whatever the connection holds. An identifier that no longer resolves
 * (a rotated-out secret, public streams turned off) is looked up among all of the
 * connection's subscriptions, so that it can still be unsubscribed.
 */
export async function subscriptionThrough(
  deps: Pick<SubscribeDeps, 'store' | 'config'>,
  connectionId: string,
  identifier: string,
): Promise<Subscription | undefined> {
  const resolved = resolveStream(identifier, deps.config);
  if (resolved.ok) {
    const sub = await deps.store.subscriptionOf(connectionId, resolved.stream);
    if (sub?.identifier === identifier) return sub;
  }
  // Also finds a subscription stored under an earlier version's key (the first hours after an
  // upgrade), which the key read above does not.
  return (await deps.store.subscriptionsOf(connectionId)).find((s) => s.identifier === identifier);
}

/** `unsubscribe`: removes the identifier's subscription. */
export async function unsubscribe(
  deps: Pick<SubscribeDeps, 'store'>,
  connection: ConnectionRecord,
  identifier: string,
  sub: Subscription,
): Promise<void> {
  await deps.store.removeSubscription(connection.connectionId, sub.stream, identifier);
}
