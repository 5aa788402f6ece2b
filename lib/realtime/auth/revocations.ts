/**
 * Revocations that outlive connections: a remote `unsubscribe` of a stream or `disconnect` of
 * an identity or connection is recorded with its time, so that a session stored before it
 * cannot bring back on reconnect what was revoked (`connect.ts`, `restore`).
 */

/** What a revocation names: a stream, an identity, or one session (by sid). */
export interface RevocationTarget {
  readonly kind: 'stream' | 'identity' | 'session';
  readonly name: string;
}

/** The latest revocation of targets, by {@link revocationKey}. */
export type RevocationTimes = ReadonlyMap<string, number>;

/** The key of a target in {@link RevocationTimes}. */
export function revocationKey(target: RevocationTarget): string {
  return `${target.kind}#${target.name}`;
}

/** Where revocations are kept, as long as a session written before them may be restored. */
export interface RevocationStore {
  /** Records that `target` was revoked at `atMs` (ms since the epoch); a later one stays. */
  revoke(target: RevocationTarget, atMs: number): Promise<void>;
  /** When each of `targets` was last revoked (ms), by {@link revocationKey}; absent: never. */
  revokedAt(targets: readonly RevocationTarget[]): Promise<RevocationTimes>;
}

/**
 * Revocations in this process's memory: what a composition without a store of its own uses
 * (sessions in memory too). Under Lambda, the DynamoDB store, beside the sessions.
 */
export class MemoryRevocationStore implements RevocationStore {
  private readonly times = new Map<string, number>();

  async revoke(target: RevocationTarget, atMs: number): Promise<void> {
    const key = revocationKey(target);
    this.times.set(key, Math.max(atMs, this.times.get(key) ?? 0));
  }

  async revokedAt(targets: readonly RevocationTarget[]): Promise<RevocationTimes> {
    const out = new Map<string, number>();
    for (const t of targets) {
      const at = this.times.get(revocationKey(t));
      if (at !== undefined) out.set(revocationKey(t), at);
    }
    return out;
  }
}
