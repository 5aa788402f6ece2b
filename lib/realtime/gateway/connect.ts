import type { Clock } from '../../kernel/clock.js';
import { forEachConcurrently } from '../../kernel/concurrency.js';
import { fingerprint, MAX_SID_BYTES, utf8Bytes } from '../../kernel/limits.js';
import type { Logger } from '../../kernel/logger.js';
import { type IdentityConfig, identify } from '../auth/identity.js';
import type { RevocationStore, RevocationTarget } from '../auth/ports.js';
import { identityStreamTarget, revocationKey, sessionStreamTarget } from '../auth/revocations.js';
import { resolveStream, type StreamsConfig } from '../auth/streams.js';
import type { GatewayConfig } from '../config.js';
import { disconnectConnection, type PresenceDropper, type SessionFinisher } from '../gone.js';
import { readPingInterval } from '../keepalive/ping-interval.js';
import type { ConnectionRecord, ConnectionStore } from '../ports.js';
import { EXT_PROTOCOL, negotiateProtocol } from '../protocol.js';
import type { ConnectionSessions, SessionSubscription } from '../session.js';

/** The `$connect` request. */
export interface ConnectRequest {
  readonly connectionId: string;
  /** The management API endpoint of this connection. */
  readonly endpoint?: string;
  /** The query string parameters (`jid`, `sid`, `pi`). */
  readonly query: Readonly<Record<string, string | undefined>>;
  /** The `Sec-WebSocket-Protocol` header value (comma-separated). */
  readonly protocols?: string;
}

/** The `$connect` answer. */
export interface ConnectResult {
  /** 200 to accept the upgrade (also for refused credentials: they are refused after it). */
  readonly statusCode: number;
  /** The subprotocol to echo in `Sec-WebSocket-Protocol`. */
  readonly protocol?: string;
}

/** What `$connect` uses. */
export interface ConnectDeps {
  readonly store: ConnectionStore;
  readonly sessions: ConnectionSessions;
  /** Remote `unsubscribe` and `disconnect` commands a restored session is checked against. */
  readonly revocations: RevocationStore;
  /**
   * Identification, and the streams settings and limit a restored subscription is
   * authorized again by.
   */
  readonly config: IdentityConfig & StreamsConfig & Pick<GatewayConfig, 'maxSubscriptions'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly newSid: () => string;
}

/**
 * `$connect`: negotiates the subprotocol (400 when neither Action Cable protocol is
 * offered), identifies the client and stores the connection with a new session. Bad
 * credentials still answer 200: the connection is stored refused (no sid), and its welcome
 * is `disconnect unauthorized` and a close. With the extended protocol and a non-empty
 * `sid`, the previous session's subscriptions are restored.
 */
export async function connect(deps: ConnectDeps, request: ConnectRequest): Promise<ConnectResult> {
  const { store, sessions, clock, logger } = deps;
  const { connectionId, endpoint, query } = request;
  const protocol = negotiateProtocol(request.protocols);
  if (!protocol) {
    logger.warn('connection refused: no supported subprotocol', {
      connectionId,
      offered: request.protocols ?? '',
    });
    return { statusCode: 400 };
  }
  const ping = readPingInterval(query.pi);
  if (!ping.ok) {
    // The connection is kept, with the default interval: the client's monitor is the one
    // that has to match it, and refusing would only make the client reconnect.
    logger.warn('ping interval ignored', { connectionId, reason: ping.refusal.message });
  }
  const pingInterval = ping.ok ? ping.seconds : undefined;
  const base = {
    connectionId,
    protocol,
    connectedAt: clock.now(),
    ...(endpoint ? { endpoint } : {}),
    ...(pingInterval !== undefined ? { pingInterval } : {}),
  };

  const identified = await identify(query.jid, deps.config, clock);
  if (!identified.ok) {
    const { reason } = identified.refusal;
    logger.warn('connection unauthorized', { connectionId, reason });
    await store.putConnection({
      ...base,
      identity: '',
      sid: '',
      refusal: reason === 'expired' ? 'token_expired' : 'unauthorized',
    });
    return { statusCode: 200, protocol };
  }
  const { identity } = identified;

  const sid = deps.newSid();
  const connection: ConnectionRecord = { ...base, identity, sid };
  await store.putConnection(connection);

  const previous = restorableSid(deps.logger, connectionId, query.sid);
  // Before the restore reads anything: a revocation at or after it applies to this session.
  const startedAt = Date.now();
  const restored =
    protocol === EXT_PROTOCOL && previous
      ? await restore(deps, connection, previous, startedAt)
      : undefined;
  await sessions.start(sid, {
    identity,
    protocol,
    subscriptions: restored ?? [],
    ...(restored ? { restoredIds: [...new Set(restored.map((s) => s.identifier))] } : {}),
    startedAt,
    writtenAt: startedAt,
  });
  logger.info('connected', {
    connectionId,
    sid: fingerprint(sid),
    protocol,
    restored: restored?.length,
  });
  return { statusCode: 200, protocol };
}

/** The `sid` a client sent, unless empty or too long to be a key (then logged). */
function restorableSid(
  logger: Logger,
  connectionId: string,
  sid: string | undefined,
): string | undefined {
  if (sid && utf8Bytes(sid) > MAX_SID_BYTES) {
    // Never a key lookup: the sessions table refuses keys over 2 KB. A new session instead.
    logger.warn('session not restored: sid too long', {
      connectionId,
      bytes: utf8Bytes(sid),
      limit: MAX_SID_BYTES,
    });
    return undefined;
  }
  return sid || undefined;
}

/** Subscriptions a restore stores at once. */
const RESTORE_CONCURRENCY = 16;

/**
 * Restores the subscriptions of the session `previous` (the `sid` the client sent) on
 * `connection`, when that session is of the same identity and the extended protocol, was not
 * ended by a remote `disconnect` (of its identity or connection) since it started, and each
 * subscription authorized again: under the current settings (signature, public namespace,
 * identifier rules), not unsubscribed remotely since it was subscribed (stream-wide, or for
 * its identity), one per stream, at most `maxSubscriptions`. The restored subscriptions, or
 * `undefined` when there is nothing to restore.
 */
async function restore(
  deps: ConnectDeps,
  connection: ConnectionRecord,
  previous: string,
  startedAt: number,
): Promise<SessionSubscription[] | undefined> {
  const { connectionId, endpoint, identity } = connection;
  const old = await deps.sessions.restore(previous);
  if (!old || old.identity !== identity || old.protocol !== EXT_PROTOCOL) {
    deps.logger.info('session not restored', {
      connectionId,
      reason: old ? 'identity differs' : 'unknown or expired sid',
    });
    return undefined;
  }
  // Each subscription is authorized again, as a new subscribe would be: a secret rotated
  // out, public streams turned off or an identifier no longer accepted ends it here.
  const authorized: SessionSubscription[] = [];
  let refused = 0;
  for (const s of old.subscriptions) {
    const resolved = resolveStream(s.identifier, deps.config);
    if (resolved.ok) {
      authorized.push({
        identifier: s.identifier,
        stream: resolved.stream,
        whisper: resolved.whisper,
        ...(s.subscribedAt === undefined ? {} : { subscribedAt: s.subscribedAt }),
      });
    } else {
      refused++;
    }
  }
  const session = { kind: 'session', name: previous } as const;
  const person = { kind: 'identity', name: identity } as const;
  const names = [...new Set(authorized.map((s) => s.stream))];
  const streams = names.map((name) => ({ kind: 'stream', name }) as const);
  // An anonymous connection has no identity a targeted unsubscribe could name.
  const own = identity ? names.map((name) => identityStreamTarget(identity, name)) : [];
  const its = names.map((name) => sessionStreamTarget(previous, name));
  const revoked = await deps.revocations.revokedAt([
    session,
    ...(identity ? [person] : []),
    ...streams,
    ...own,
    ...its,
  ]);
  const oldStart = old.startedAt ?? 0;
  const ended = [session, person].some((t) => (revoked.get(revocationKey(t)) ?? -1) >= oldStart);
  if (ended) {
    deps.logger.info('session not restored', { connectionId, reason: 'disconnected remotely' });
    return undefined;
  }
  // Revoked when unsubscribed remotely since it was subscribed, stream-wide, for this
  // identity or for this session (a session of an earlier version has no time per subscription: since the
  // session stored it).
  const at = (t: RevocationTarget) => revoked.get(revocationKey(t)) ?? -1;
  const kept = authorized.filter((s) => {
    const since = s.subscribedAt ?? old.writtenAt ?? 0;
    if (at({ kind: 'stream', name: s.stream }) >= since) return false;
    if (at(sessionStreamTarget(previous, s.stream)) >= since) return false;
    return !identity || at(identityStreamTarget(identity, s.stream)) < since;
  });
  refused += authorized.length - kept.length;
  // A restored subscription dates from before the revocations were read: one recorded from
  // then on revokes it too. Stored a few at a time, each counted against the limit.
  const added: (SessionSubscription | undefined)[] = new Array(kept.length);
  await forEachConcurrently(
    kept.map((s, i) => ({ s: { ...s, subscribedAt: startedAt }, i })),
    RESTORE_CONCURRENCY,
    async ({ s, i }) => {
      const outcome = await deps.store.addSubscription(
        { connectionId, ...s, ...(endpoint ? { endpoint } : {}) },
        deps.config.maxSubscriptions,
      );
      if (outcome === 'added') added[i] = s;
    },
  );
  const restored = added.filter((s): s is SessionSubscription => s !== undefined);
  refused += kept.length - restored.length;
  if (refused > 0) {
    deps.logger.info('session restored without subscriptions it no longer authorizes', {
      connectionId,
      refused,
    });
  }
  return restored;
}

/**
 * `$disconnect`: finishes the session (its TTL starts) and removes the connection and its
 * subscriptions ({@link disconnectConnection}, also what a gone connection gets).
 */
export async function disconnect(
  deps: {
    readonly store: ConnectionStore;
    readonly sessions: SessionFinisher;
    readonly presence?: PresenceDropper | undefined;
    readonly clock?: Clock;
    logger: Logger;
  },
  connectionId: string,
): Promise<void> {
  await disconnectConnection(deps, connectionId);
  deps.logger.info('disconnected', { connectionId });
}
