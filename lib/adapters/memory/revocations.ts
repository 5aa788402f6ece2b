import type {
  RevocationStore,
  RevocationTarget,
  RevocationTimes,
} from '../../realtime/auth/ports.js';
import { revocationKey } from '../../realtime/auth/revocations.js';

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
