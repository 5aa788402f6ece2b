import { forEachConcurrently } from '../kernel/concurrency.js';
import { errorMessage } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import type { ConnectionApi } from './connection-api.js';
import type { ConnectionRecord, ConnectionStore, Subscription } from './connections.js';
import type { DeliveryReport } from './delivery-report.js';
import { disconnectFrame } from './protocol.js';

/** What the remote commands need of the fan-out. */
export interface RemoteCommandDeps {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  readonly logger: Logger;
  /** Posts in flight at once. */
  readonly concurrency: number;
  /** Subscribers read per page. */
  readonly pageSize: number;
  /** Posts one frame, recording the outcome in `report` (a 410 disconnects the connection). */
  postOne(
    post: { connectionId: string; frame: string; endpoint: string | undefined },
    report: DeliveryReport,
  ): Promise<'sent' | 'gone' | 'failed' | 'throttled'>;
}

/**
 * AnyCable's remote `disconnect`: a `disconnect` frame to each connection of an identity (or
 * one connection), then the connection closed.
 */
export async function remoteDisconnect(
  deps: RemoteCommandDeps,
  payload: Record<string, unknown>,
): Promise<void> {
  // AnyCable's remote disconnect names the identity `identifier`; `identity` is accepted too.
  const identity = payload.identity ?? payload.identifier;
  const connectionId = payload.connectionId;
  let targets: ConnectionRecord[];
  if (typeof connectionId === 'string') {
    const c = await deps.store.getConnection(connectionId);
    targets = c ? [c] : [];
  } else if (typeof identity === 'string') {
    targets = await deps.store.connectionsOf(identity);
  } else {
    deps.logger.warn('remote disconnect without identity or connectionId', { payload });
    return;
  }
  const frame = disconnectFrame(
    'remote',
    typeof payload.reconnect === 'boolean' ? payload.reconnect : true,
  );
  const report: DeliveryReport = { sent: 0, gone: [], failed: [], retried: 0 };
  await forEachConcurrently(targets, deps.concurrency, async (c) => {
    const post = { connectionId: c.connectionId, frame, endpoint: c.endpoint };
    const result = await deps.postOne(post, report);
    if (result === 'gone') return;
    try {
      await deps.api.close(c.connectionId, c.endpoint);
    } catch (error) {
      report.failed.push({ connectionId: c.connectionId, error, retried: 0 });
    }
  });
  const target = String(connectionId ?? identity);
  for (const f of report.failed) {
    deps.logger.error('remote disconnect: post failed', {
      target,
      connectionId: f.connectionId,
      error: errorMessage(f.error),
    });
  }
  deps.logger.debug('remote disconnect', {
    target,
    sent: report.sent,
    gone: report.gone.length,
    failed: report.failed.length,
  });
}

/** AnyCable's remote `unsubscribe`: every subscription to a stream removed. */
export async function remoteUnsubscribe(
  deps: RemoteCommandDeps,
  payload: Record<string, unknown>,
): Promise<void> {
  const stream = payload.stream;
  if (typeof stream !== 'string' || !stream) {
    deps.logger.warn('remote unsubscribe without stream', { payload });
    return;
  }
  const subs: Subscription[] = [];
  for await (const page of deps.store.subscribersOf(stream, deps.pageSize)) subs.push(...page);
  await forEachConcurrently(subs, deps.concurrency, (s) =>
    deps.store.removeSubscription(s.connectionId, s.stream, s.identifier),
  );
  deps.logger.info('remote unsubscribe', { stream, subscriptions: subs.length });
}
