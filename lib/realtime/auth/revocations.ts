import type { RevocationTarget } from './ports.js';

/**
 * Revocations that outlive connections: a remote `unsubscribe` of a stream or `disconnect` of
 * an identity or connection is recorded with its time, so that a session stored before it
 * cannot bring back on reconnect what was revoked (`connect.ts`, `restore`).
 */

/** The key of a target in {@link RevocationTimes}. */
export function revocationKey(target: RevocationTarget): string {
  return `${target.kind}#${target.name}`;
}
