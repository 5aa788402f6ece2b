import { describe, expect, it } from 'vitest';
import {
  identityStreamTarget,
  type RevocationStore,
  type RevocationTarget,
  revocationKey,
} from '../../lib/core';

let unique = 0;
/** A name no other test uses (the tables are shared). */
function uniqueName(label: string): string {
  unique++;
  return `${label}-${process.pid}-${Date.now()}-${unique}`;
}

/**
 * What every {@link RevocationStore} does: the latest time per target, each kind of target
 * apart from the others. Run against memory in unit tests and against DynamoDB Local in
 * integration tests.
 */
export function revocationStoreContract(name: string, factory: () => Promise<RevocationStore>) {
  describe(`${name} (RevocationStore contract)`, () => {
    it('answers the latest revocation of each target, and nothing for one never revoked', async () => {
      const store = await factory();
      const stream: RevocationTarget = { kind: 'stream', name: uniqueName('s') };
      const never: RevocationTarget = { kind: 'stream', name: uniqueName('never') };
      await store.revoke(stream, 2_000);
      await store.revoke(stream, 1_000); // an earlier one does not lower it
      await store.revoke(stream, 3_000);
      const times = await store.revokedAt([stream, never]);
      expect(times.get(revocationKey(stream))).toBe(3_000);
      expect(times.has(revocationKey(never))).toBe(false);
    });

    it('keeps every kind apart: one name revoked as a stream revokes no identity, session or pair', async () => {
      const store = await factory();
      const shared = uniqueName('x');
      const kinds: RevocationTarget[] = [
        { kind: 'stream', name: shared },
        { kind: 'identity', name: shared },
        { kind: 'session', name: shared },
        { kind: 'identity-stream', name: shared },
      ];
      await store.revoke(kinds[0]!, 1_000);
      const times = await store.revokedAt(kinds);
      expect([...times.keys()]).toEqual([revocationKey(kinds[0]!)]);
    });

    it("revokes one identity's subscriptions to one stream, and no other pair", async () => {
      const store = await factory();
      const alice = uniqueName('alice');
      const stream = uniqueName('room');
      const cut = identityStreamTarget(alice, stream);
      await store.revoke(cut, 5_000);
      // Pairs whose parts join to the same text are other pairs.
      const others = [
        identityStreamTarget(`${alice}#`, stream),
        identityStreamTarget(alice, `${stream}#`),
        identityStreamTarget(`${alice}","${stream}`, ''),
        identityStreamTarget(uniqueName('bob'), stream),
      ];
      const times = await store.revokedAt([cut, ...others]);
      expect(times.get(revocationKey(cut))).toBe(5_000);
      expect(times.size).toBe(1);
      // Neither the stream nor the identity as a whole is revoked.
      const whole = await store.revokedAt([
        { kind: 'stream', name: stream },
        { kind: 'identity', name: alice },
      ]);
      expect(whole.size).toBe(0);
    });

    it('answers for more targets than one read takes (a restore of many streams)', async () => {
      const store = await factory();
      const who = uniqueName('many');
      const targets = Array.from({ length: 150 }, (_, i) => identityStreamTarget(who, `s${i}`));
      await Promise.all(targets.filter((_, i) => i % 3 === 0).map((t) => store.revoke(t, 7)));
      const times = await store.revokedAt(targets);
      expect(times.size).toBe(50);
      expect(times.get(revocationKey(targets[147]!))).toBe(7);
    });
  });
}
