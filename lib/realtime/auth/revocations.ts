import type { RevocationTarget } from './ports.js';

/**
 * Revocations that outlive connections: a remote `unsubscribe` of a stream (or of one
 * identity's subscriptions to it) or `disconnect` of an identity or connection is recorded
 * with its time, so that a session stored before it cannot bring back on reconnect what was
 * revoked (`connect.ts`, `restore`).
 */

/** The key of a target in {@link RevocationTimes}. */
export function revocationKey(target: RevocationTarget): string {
  return `${target.kind}#${target.name}`;
}

/**
 * The target of one identity's subscriptions to one stream (a targeted remote
 * `unsubscribe`): its name is the JSON array `[identity, stream]`, so no two pairs share a
 * name whatever characters they hold.
 */
export function identityStreamTarget(identity: string, stream: string): RevocationTarget {
  return { kind: 'identity-stream', name: JSON.stringify([identity, stream]) };
}

/**
 * The target of one session's subscription to one stream (a remote `unsubscribe` of one
 * connection): its name is the JSON array `[sid, stream]`.
 */
export function sessionStreamTarget(sid: string, stream: string): RevocationTarget {
  return { kind: 'session-stream', name: JSON.stringify([sid, stream]) };
}
