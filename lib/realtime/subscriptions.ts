import type { HistoryReader } from '../broker/types.js';
import { errorMessage, ProtocolError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import type { GatewayConfig } from './config.js';
import type { ConnectionRecord, ConnectionStore, Subscription } from './connections.js';
import { type PostFrame, serveHistory } from './history.js';
import { EXT_PROTOCOL, loggedIdentifier, replyFrame } from './protocol.js';
import type { ConnectionSessions } from './session.js';
import { resolveStream } from './streams.js';

/** What subscribing uses. */
export interface SubscribeDeps {
  readonly store: ConnectionStore;
  readonly sessions: ConnectionSessions;
  readonly history: HistoryReader;
  readonly config: GatewayConfig;
  readonly logger: Logger;
}

/**
 * `subscribe`: resolves the identifier's stream (refused: `reject_subscription` and a
 * {@link ProtocolError}), stores the subscription and the session, confirms, then serves
 * the history the frame asks for (extended protocol only). A repeated subscribe confirms
 * nothing; a subscription whose session or confirmation failed is removed again.
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
  const { store, sessions, logger } = deps;
  const { connectionId } = connection;
  const resolved = resolveStream(identifier, deps.config);
  if (!resolved.ok) {
    await post(replyFrame('reject_subscription', identifier));
    throw new ProtocolError(`subscription rejected: ${resolved.refusal.message}`, {
      connectionId,
      command: 'subscribe',
      identifier,
    });
  }
  const sub: Subscription = {
    connectionId,
    identifier,
    stream: resolved.stream,
    whisper: resolved.whisper,
    ...(endpoint ? { endpoint } : {}),
  };
  if (!(await store.addSubscription(sub))) {
    // The client re-sends subscribe after 5 s without an answer, while the first one may
    // still be under way in another Lambda. Exactly one call confirms (and serves history):
    // the one that stored the subscription. A second confirm would make the client
    // unsubscribe ("subscription not found"), as AnyCable's clients do.
    logger.info('subscribe: already subscribed, not confirmed again', {
      connectionId,
      identifier: loggedIdentifier(identifier),
    });
    return;
  }
  try {
    await sessions.commit(connection);
    await post(replyFrame('confirm_subscription', identifier));
  } catch (error) {
    // Not confirmed: the subscription goes, so that the client's retry starts over.
    await store.removeSubscription(connectionId, sub.stream, identifier);
    await sessions.commit(connection).catch((cause: unknown) =>
      logger.error('subscribe: session not rolled back', {
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

/** `unsubscribe`: removes the identifier's subscriptions (`subs`) and stores the session. */
export async function unsubscribe(
  deps: Pick<SubscribeDeps, 'store' | 'sessions'>,
  connection: ConnectionRecord,
  identifier: string,
  subs: readonly Subscription[],
): Promise<void> {
  await Promise.all(
    subs.map((s) => deps.store.removeSubscription(connection.connectionId, s.stream, identifier)),
  );
  await deps.sessions.commit(connection);
}
