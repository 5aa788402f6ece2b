import { forEachConcurrently } from '../../kernel/concurrency.js';
import { clipForLog } from '../../kernel/limits.js';
import type { RevocationTarget } from '../auth/ports.js';
import { identityStreamTarget, sessionStreamTarget } from '../auth/revocations.js';
import type { ConnectionStore, IndexProbe, Subscription } from '../ports.js';
import type { PresenceStore } from '../presence/ports.js';
import type { DeliveryReport, RemoteCommandDeps } from './ports.js';

/**
 * The most a remote `unsubscribe` waits, in ms, for the stream index to stop listing what it
 * removed ({@link awaitIndex}). DynamoDB updates a GSI usually well under a second after the
 * write; 10 s rides out an index that lags under load, and still bounds how long the
 * stream's later broadcasts, queued behind the command in its SQS group, are held up.
 */
export const INDEX_WAIT_MS = 10_000;
/** The first pause between reads of the index, in ms; doubled per read up to the next. */
export const INDEX_POLL_FIRST_MS = 50;
/** The longest pause between reads of the index, in ms. */
export const INDEX_POLL_MAX_MS = 500;

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
 * - `{ stream, connectionId }`: only that connection's subscription to the stream removed,
 *   then revoked for its session (a `session-stream` target), so that its `sid` does not
 *   bring it back. A remote `disconnect` committed through `orderedDisconnect` is
 *   preceded by one of these (or the identity form) per stream its target holds.
 *
 * It returns only once the stream index, which the fan-out reads and DynamoDB updates
 * asynchronously, no longer lists what it removed ({@link awaitIndex}), so that the next
 * message of the stream's group, a broadcast, reaches none of it. Past {@link INDEX_WAIT_MS}
 * it logs a WARN and returns all the same: a broadcast handled next may then still reach a
 * removed subscription (docs/protocol.md, Remote commands).
 *
 * A payload that names `identifier`, or both `identity` and `connectionId`, is refused
 * (logged, nothing removed): `identifier` is a channel identifier everywhere in this protocol
 * (AnyCable's remote `disconnect` alone uses it for the identity) and does not narrow an
 * unsubscribe, so such a payload must not widen into a stream-wide one. An `identity` or
 * `connectionId` that is not a non-empty string is refused too: anonymous connections have
 * no identity to be named by.
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
  if (payload.identifier !== undefined) {
    deps.logger.warn('remote unsubscribe refused: only `identity` or `connectionId` narrows it', {
      payload,
    });
    return;
  }
  const narrowed = (['identity', 'connectionId'] as const).filter((k) => payload[k] !== undefined);
  if (narrowed.length > 1) {
    deps.logger.warn('remote unsubscribe refused: name `identity` or `connectionId`, not both', {
      payload,
    });
    return;
  }
  const by = narrowed[0];
  if (by !== undefined) {
    const name = payload[by];
    if (typeof name !== 'string' || !name) {
      deps.logger.warn(`remote unsubscribe refused: \`${by}\` must be a non-empty string`, {
        payload,
      });
      return;
    }
    await unsubscribeOne(deps, stream, by, name);
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
  const at = Date.now();
  await deps.revocations.revoke({ kind: 'stream', name: stream }, at);
  // Whatever the index lists that was made until the revocation is either removed (the index
  // lags) or still stored: missed by the removal (not yet indexed when it read), so removed now.
  const pending = async (listed: Subscription[]) => {
    const held = await Promise.all(
      listed.map((s) => deps.store.subscriptionOf(s.connectionId, stream)),
    );
    const missed = listed.filter((s, i) => {
      const h = held[i];
      return h !== undefined && sameSubscription(h, s);
    });
    removed += (await removeSubscribers(deps.store, deps.concurrency, missed, deps.presence)).sent;
    return listed;
  };
  const wait = await awaitIndex(deps, { stream, until: at }, pending, () => ({
    stream: clipForLog(stream),
    removed,
  }));
  deps.logger.info('remote unsubscribe', {
    stream,
    subscriptions: removed,
    indexChecks: wait.checks,
  });
}

/**
 * The targeted forms of {@link remoteUnsubscribe}: removes `name`'s subscriptions to `stream`
 * (an identity's on each of its connections, or one connection's), revokes them, and waits
 * for the stream index to stop listing them.
 */
async function unsubscribeOne(
  deps: RemoteCommandDeps,
  stream: string,
  by: 'identity' | 'connectionId',
  name: string,
): Promise<void> {
  let removed: Subscription[];
  let target: RevocationTarget | undefined;
  if (by === 'identity') {
    removed = await removeIdentityFromStream(deps, stream, name);
    target = identityStreamTarget(name, stream);
  } else {
    const [connection, held] = await Promise.all([
      deps.store.getConnection(name),
      deps.store.subscriptionOf(name, stream),
    ]);
    removed = [];
    await removeSubscribers(deps.store, 1, held ? [held] : [], deps.presence, removed);
    // A connection that is not stored (it ended) has no session left to restore from here.
    target = connection?.sid ? sessionStreamTarget(connection.sid, stream) : undefined;
  }
  const at = Date.now();
  if (target) await deps.revocations.revoke(target, at);
  const connectionIds = removed.map((s) => s.connectionId);
  const fields = () => ({
    stream: clipForLog(stream),
    [by]: clipForLog(name),
    removed: removed.length,
  });
  const wait =
    removed.length === 0
      ? { checks: 0 }
      : await awaitIndex(
          deps,
          { stream, until: at, connectionIds },
          async (listed) => listed.filter((s) => removed.some((r) => sameSubscription(r, s))),
          fields,
        );
  deps.logger.info('remote unsubscribe', {
    stream: clipForLog(stream),
    [by]: clipForLog(name),
    subscriptions: removed.length,
    indexChecks: wait.checks,
  });
}

/**
 * Reads the stream index ({@link ConnectionStore.listedInIndex}) until `pending` finds nothing
 * in what it lists, pausing {@link INDEX_POLL_FIRST_MS} after the first read, twice as long
 * after each next one, at most {@link INDEX_POLL_MAX_MS}. Once the pauses add up to
 * {@link INDEX_WAIT_MS} (or the clock says as much time passed), it logs a WARN with the
 * counts (`fields`, how many are still `listed`, the reads made) and returns: failing the
 * command would hold up the stream's broadcasts behind it for longer still. A read that
 * fails fails the command, as a failing removal does (it is run again).
 *
 * Cost, index caught up at the first read (the normal case), on DynamoDB: a strongly
 * consistent read of the stream's spread item (1 read unit), then, targeted, one Query by
 * exact key per removed subscription (0.5 read unit each; with the stream spread over S > 1
 * shards, one per shard it may sit in: at most log2(S) + 1), or, stream-wide, one Query per
 * shard (0.5 read unit each while it holds nothing made until the command): 1.5 read units
 * for a stream on one shard. Each later read costs as much again, and stream-wide 1 read
 * unit more per subscription listed (its read in the table). Resolves to the reads made.
 */
export async function awaitIndex(
  deps: Pick<RemoteCommandDeps, 'store' | 'logger' | 'clock' | 'sleep'>,
  probe: IndexProbe,
  pending: (listed: Subscription[]) => Promise<Subscription[]>,
  fields: () => Record<string, unknown>,
): Promise<{ checks: number }> {
  const started = deps.clock.now();
  let pause = INDEX_POLL_FIRST_MS;
  let paused = 0;
  for (let checks = 1; ; checks++) {
    const listed = await pending(await deps.store.listedInIndex(probe));
    if (listed.length === 0) return { checks };
    if (paused >= INDEX_WAIT_MS || deps.clock.now() - started >= INDEX_WAIT_MS) {
      deps.logger.warn('remote unsubscribe: the stream index still lists removed subscriptions', {
        ...fields(),
        listed: listed.length,
        checks,
        pausedMs: paused,
      });
      return { checks };
    }
    await deps.sleep(pause);
    paused += pause;
    pause = Math.min(pause * 2, INDEX_POLL_MAX_MS);
  }
}

/**
 * Removes one identity's subscriptions to `stream`, and their presence, and resolves to the
 * ones it removed. It reads the identity's connections (`connectionsOf`: one Query of the
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
): Promise<Subscription[]> {
  const connections = await deps.store.connectionsOf(identity);
  const held: Subscription[] = [];
  await forEachConcurrently(connections, deps.concurrency, async (c) => {
    const s = await deps.store.subscriptionOf(c.connectionId, stream);
    if (s) held.push(s);
  });
  const removed: Subscription[] = [];
  await removeSubscribers(deps.store, deps.concurrency, held, deps.presence, removed);
  return removed;
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
  removed?: Subscription[],
): Promise<DeliveryReport> {
  const report: DeliveryReport = { sent: 0, gone: [], failed: [], retried: 0 };
  await forEachConcurrently(subscribers, concurrency, async (s) => {
    if (await store.removeSubscription(s.connectionId, s.stream, s.identifier)) {
      report.sent++;
      removed?.push(s);
    }
    await presence?.leave(s.stream, s.connectionId, Date.now());
  });
  return report;
}

/** Whether `a` and `b` are one subscription (not the same connection subscribed again). */
function sameSubscription(a: Subscription, b: Subscription): boolean {
  return (
    a.connectionId === b.connectionId &&
    a.stream === b.stream &&
    a.identifier === b.identifier &&
    a.subscribedAt === b.subscribedAt
  );
}
