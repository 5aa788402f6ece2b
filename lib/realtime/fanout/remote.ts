import type { RemoteCommandMessage } from '../../broker/types.js';
import { forEachConcurrently } from '../../kernel/concurrency.js';
import { errorMessage } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import type { ConnectionApi, ConnectionRecord, ConnectionStore, Subscription } from '../ports.js';
import type { PresenceStore } from '../presence/ports.js';
import { disconnectFrame } from '../protocol.js';
import type { DeliveryReport } from './delivery-report.js';

/** What the remote commands need of the fan-out. */
export interface RemoteCommandDeps {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  readonly logger: Logger;
  /** Where revocations are recorded, so that a stored session cannot undo them. */
  readonly revocations: RevocationStore;
  /**
   * Removes every subscription to a stream in fan-out tasks, each of bounded work, and
   * resolves to how many it removed; absent, the command removes them itself.
   */
  readonly removeAudience?: (stream: string) => Promise<number>;
  /** Presence of the subscriptions a remote `unsubscribe` removes. @default none */
  readonly presence?: Pick<PresenceStore, 'leave'>;
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

/** Runs a remote command: `disconnect` or `unsubscribe`; another is logged and ignored. */
export async function runRemoteCommand(
  deps: RemoteCommandDeps,
  cmd: RemoteCommandMessage,
): Promise<void> {
  const payload = (
    typeof cmd.payload === 'object' && cmd.payload !== null ? cmd.payload : {}
  ) as Record<string, unknown>;
  if (cmd.command === 'disconnect') {
    await remoteDisconnect(deps, payload);
  } else if (cmd.command === 'unsubscribe') {
    await remoteUnsubscribe(deps, payload);
  } else {
    deps.logger.warn('unknown remote command', { command: cmd.command });
  }
}

/**
 * Removes exactly these subscriptions (a remote `unsubscribe` task's own part of the
 * audience), and their connections' presence on the stream (a `leave` for each id whose last
 * session that was): `sent` counts the subscriptions this call removed.
 */
export async function removeSubscribers(
  store: Pick<ConnectionStore, 'removeSubscription'>,
  concurrency: number,
  subscribers: readonly Subscription[],
  presence?: Pick<PresenceStore, 'leave'>,
): Promise<DeliveryReport> {
  const report: DeliveryReport = { sent: 0, gone: [], failed: [], retried: 0 };
  await forEachConcurrently(subscribers, concurrency, async (s) => {
    if (await store.removeSubscription(s.connectionId, s.stream, s.identifier)) report.sent++;
    await presence?.leave(s.stream, s.connectionId, Date.now());
  });
  return report;
}

/**
 * AnyCable's remote `disconnect`: a `disconnect` frame to each connection of an identity (or
 * one connection), then the connection closed. The sessions they had are ended first: the
 * identity's (every session started until now) or the connection's, so that a reconnect
 * with an old `sid` restores nothing.
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
  const at = Date.now();
  if (typeof connectionId === 'string') {
    await Promise.all(
      targets
        .filter((c) => c.sid)
        .map((c) => deps.revocations.revoke({ kind: 'session', name: c.sid }, at)),
    );
  } else if (typeof identity === 'string' && identity) {
    await deps.revocations.revoke({ kind: 'identity', name: identity }, at);
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

/**
 * AnyCable's remote `unsubscribe`: every subscription to a stream removed (in fan-out tasks
 * when the fan-out has them), then the stream revoked: no restore brings back a subscription
 * to it made until now, also one the removal missed (a subscribe racing the command) and one
 * a connection that ended meanwhile stored in its session.
 */
export async function remoteUnsubscribe(
  deps: RemoteCommandDeps,
  payload: Record<string, unknown>,
): Promise<void> {
  const stream = payload.stream;
  if (typeof stream !== 'string' || !stream) {
    deps.logger.warn('remote unsubscribe without stream', { payload });
    return;
  }
  let removed = 0;
  if (deps.removeAudience) {
    removed = await deps.removeAudience(stream);
  } else {
    for await (const page of deps.store.subscribersOf(stream, deps.pageSize)) {
      removed += (await removeSubscribers(deps.store, deps.concurrency, page, deps.presence)).sent;
    }
  }
  await deps.revocations.revoke({ kind: 'stream', name: stream }, Date.now());
  deps.logger.info('remote unsubscribe', { stream, subscriptions: removed });
}
