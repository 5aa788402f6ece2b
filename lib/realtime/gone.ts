import type { SessionCache } from '../broker/types.js';
import type { Clock } from '../kernel/clock.js';
import type { ConnectionRecord, ConnectionStore } from './connections.js';

/** Where sessions end: the session cache. */
export type SessionFinisher = Pick<SessionCache, 'finishSession'>;

/** What {@link disconnectGone} needs. */
export interface GonePolicy {
  readonly store: ConnectionStore;
  readonly sessions: SessionFinisher;
  readonly clock: Clock;
  /** A connection younger than this (ms) is left alone. */
  readonly goneGraceMs: number;
}

/**
 * `$disconnect`: finishes the connection's session (its TTL starts) and removes the
 * connection and its subscriptions. `known` saves the read of the connection.
 */
export async function disconnectConnection(
  policy: Pick<GonePolicy, 'store' | 'sessions'>,
  connectionId: string,
  known?: ConnectionRecord,
): Promise<void> {
  const connection = known ?? (await policy.store.getConnection(connectionId));
  if (connection?.sid) await policy.sessions.finishSession(connection.sid);
  await policy.store.removeConnection(connectionId);
}

/**
 * The one policy for a connection that answered 410, on fan-out, whispers, remote commands
 * and pings alike: younger than `goneGraceMs` it is left alone (API Gateway answers 410
 * until `$connect` has returned, while the connection is already stored); otherwise it is
 * disconnected as by `$disconnect` ({@link disconnectConnection}). An unknown connection's
 * leftover subscriptions are removed. Returns whether it was disconnected.
 */
export async function disconnectGone(
  policy: GonePolicy,
  connectionId: string,
  known?: ConnectionRecord,
): Promise<boolean> {
  const connection = known ?? (await policy.store.getConnection(connectionId));
  if (connection && policy.clock.now() - connection.connectedAt < policy.goneGraceMs) return false;
  await disconnectConnection(policy, connectionId, connection);
  return true;
}
