import type { RemoteCommandMessage } from '../../broker/types.js';
import { forEachConcurrently } from '../../kernel/concurrency.js';
import { errorMessage } from '../../kernel/errors.js';
import { clipForLog } from '../../kernel/limits.js';
import type { Logger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import { identityStreamTarget } from '../auth/revocations.js';
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

/**
 * Runs a remote command: `disconnect` ({@link remoteDisconnect}) or `unsubscribe`
 * ({@link remoteUnsubscribe}); another is logged and ignored.
 */
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
 *
 * Unlike `unsubscribe`, it is keyed by its target (`$commands#<connectionId | identity>`),
 * not by a stream: it names none, and an identity's streams are not known when the command
 * is committed. So it is in no order with any stream's broadcasts: one committed after it
 * may still reach the connection before it closes. To cut an identity off in order, commit a
 * targeted `unsubscribe` (`{ stream, identity }`) for each stream that must stop in order,
 * then the `disconnect`.
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
 * A remote `unsubscribe` (AnyCable's, extended), keyed by its stream so that it is handled
 * in commit order with the stream's broadcasts (`remoteCommandKey`):
 * - `{ stream }`: every subscription to the stream removed (in fan-out tasks when the fan-out
 *   has them), then the stream revoked: no restore brings back a subscription to it made
 *   until now, also one the removal missed (a subscribe racing the command) and one a
 *   connection that ended meanwhile stored in its session.
 * - `{ stream, identity }`: only that identity's subscriptions to the stream removed
 *   ({@link removeIdentityFromStream}), then only those revoked (an `identity-stream`
 *   target): other subscribers keep theirs, and the identity keeps its other streams.
 *
 * The order holds as far as the fan-out's read of the audience sees the removal: the
 * DynamoDB store reads it from an index that DynamoDB updates asynchronously, so on AWS a
 * broadcast handled right after may still find a removed subscription (docs/protocol.md,
 * Remote commands).
 *
 * A payload that names `identifier` or `connectionId` is refused (logged, nothing removed):
 * `identifier` is a channel identifier everywhere in this protocol (AnyCable's remote
 * `disconnect` alone uses it for the identity), and neither narrows an unsubscribe, so such
 * a payload must not widen into a stream-wide one. An `identity` that is not a non-empty
 * string is refused too: anonymous connections have none to be named by.
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
  if (payload.identifier !== undefined || payload.connectionId !== undefined) {
    deps.logger.warn('remote unsubscribe refused: only `identity` narrows it', { payload });
    return;
  }
  if (payload.identity !== undefined) {
    const identity = payload.identity;
    if (typeof identity !== 'string' || !identity) {
      deps.logger.warn('remote unsubscribe refused: `identity` must be a non-empty string', {
        payload,
      });
      return;
    }
    const removed = await removeIdentityFromStream(deps, stream, identity);
    await deps.revocations.revoke(identityStreamTarget(identity, stream), Date.now());
    deps.logger.info('remote unsubscribe', {
      stream: clipForLog(stream),
      identity: clipForLog(identity),
      subscriptions: removed,
    });
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

/**
 * Removes one identity's subscriptions to `stream`, and their presence, and resolves to how
 * many it removed. It reads the identity's connections (`connectionsOf`: one Query of the
 * `byIdentity` index) and each one's subscription to the stream (`subscriptionOf`: one read
 * by key), so its work is bounded by the identity's connections, never by the stream's
 * audience: subscription items do not carry the identity, and finding them from the stream's
 * side would read every subscriber. A connection the index does not list yet (one stored a
 * moment before the command) is missed, as a subscribe racing a stream-wide unsubscribe is;
 * the revocation still keeps a restore from bringing its subscription back.
 */
export async function removeIdentityFromStream(
  deps: Pick<RemoteCommandDeps, 'store' | 'concurrency' | 'presence'>,
  stream: string,
  identity: string,
): Promise<number> {
  const connections = await deps.store.connectionsOf(identity);
  const held: Subscription[] = [];
  await forEachConcurrently(connections, deps.concurrency, async (c) => {
    const s = await deps.store.subscriptionOf(c.connectionId, stream);
    if (s) held.push(s);
  });
  return (await removeSubscribers(deps.store, deps.concurrency, held, deps.presence)).sent;
}
