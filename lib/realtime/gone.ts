import { type Clock, systemClock } from '../kernel/clock.js';
import type { ConnectionRecord, ConnectionStore } from './ports.js';
import type { PresenceStore } from './presence/ports.js';
import { closeSession, type SessionCloser } from './session.js';

/** Where sessions end: the session cache. */
export type SessionFinisher = SessionCloser;

/**
 * Presence of connections that end (each stays present `ttlMs` more, then leaves) and of
 * subscriptions a remote `unsubscribe` removes (they leave at once).
 */
export interface PresenceDropper {
  readonly store: Pick<PresenceStore, 'drop' | 'leave'>;
  readonly ttlMs: number;
}

/** What {@link disconnectGone} needs. */
export interface GonePolicy {
  readonly store: ConnectionStore;
  readonly sessions: SessionFinisher;
  /** @default no presence */
  readonly presence?: PresenceDropper;
  readonly clock: Clock;
  /** A connection younger than this (ms) is left alone. */
  readonly goneGraceMs: number;
}

/**
 * `$disconnect`: drops the connection's presence (each of its sessions stays present for the
 * presence TTL, then leaves), removes the connection and its subscriptions, then stores them
 * in its session and finishes it (its TTL starts: {@link closeSession}). `known` saves the
 * read of the connection. A failed drop throws before the connection is removed, so that the
 * next attempt (the pinger's, at the latest) finds it again.
 */
export async function disconnectConnection(
  policy: Pick<GonePolicy, 'store' | 'sessions' | 'presence'> & { readonly clock?: Clock },
  connectionId: string,
  known?: ConnectionRecord,
): Promise<void> {
  const { presence } = policy;
  const connection = known ?? (await policy.store.getConnection(connectionId));
  // Before the read: a revocation at or after it applies to what is read (see `restore`).
  const readAt = Date.now();
  const subs = await policy.store.removeConnection(connectionId);
  // First the session: a client reconnecting at once restores what it held.
  if (connection?.sid) await closeSession(policy.sessions, connection.sid, subs, readAt);
  // After the connection is gone: a join racing this (its frame is not ordered with
  // `$disconnect`) is either stored by now, and dropped here, or finds the connection gone
  // and takes itself back (presence/commands.ts).
  if (presence) {
    await presence.store.drop(connectionId, (policy.clock ?? systemClock).now(), presence.ttlMs);
  }
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
