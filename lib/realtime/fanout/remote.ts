import type { RemoteCommandMessage } from '../../broker/types.js';
import { forEachConcurrently } from '../../kernel/concurrency.js';
import { errorMessage } from '../../kernel/errors.js';
import type { ConnectionRecord } from '../ports.js';
import { disconnectFrame } from '../protocol.js';
import type { DeliveryReport, RemoteCommandDeps } from './ports.js';
import { remoteUnsubscribe } from './unsubscribe.js';

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
 * AnyCable's remote `disconnect`: a `disconnect` frame to each connection of an identity (or
 * one connection), then the connection closed. The sessions they had are ended first: the
 * identity's (every session started until now) or the connection's, so that a reconnect
 * with an old `sid` restores nothing.
 *
 * Unlike `unsubscribe`, it is keyed by its target (`$commands#<connectionId | identity>`),
 * not by a stream: it names none, so it is in no order with any stream's broadcasts. It is
 * put in order when committed: `orderedDisconnect` (which `POST /_broadcast` applies) reads
 * the streams its target holds and commits a targeted `unsubscribe` of each with it, keyed
 * by the stream; a `disconnect` committed without them, as a bare `RemoteCommandEvent`, may
 * still be overtaken by a broadcast committed after it.
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
