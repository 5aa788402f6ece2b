import { beforeEach, describe, expect, it } from 'vitest';
import type { ConnectionStore, Subscription } from '../../lib/core';
import { shardOf } from '../../lib/realtime/fanout/spread';

let n = 0;
const id = (label: string) => `${label}-${process.pid}-${Date.now()}-${++n}`;

/** A connection id whose shard under `spread` shards is not shard 0 (so not its shard under 1). */
function idOffShardZero(label: string, spread: number): string {
  for (;;) {
    const candidate = id(label);
    if (shardOf(candidate, spread) !== 0) return candidate;
  }
}

const ids = (subs: readonly Subscription[]) => subs.map((s) => s.connectionId).sort();

/**
 * The {@link ConnectionStore.listedInIndex} contract, run against memory and DynamoDB (whose
 * emulator, like the memory store, updates the index at once: a lagging index is modelled in
 * test/unit/realtime/fanout/index-lag.test.ts).
 */
export function indexProbeContract(
  name: string,
  factory: () => Promise<ConnectionStore> | ConnectionStore,
): void {
  describe(`${name} (ConnectionStore.listedInIndex contract)`, () => {
    let store: ConnectionStore;
    beforeEach(async () => {
      store = await factory();
    });

    const subscribe = (connectionId: string, stream: string, subscribedAt?: number) =>
      store.addSubscription({
        connectionId,
        stream,
        identifier: `id-${stream}`,
        ...(subscribedAt === undefined ? {} : { subscribedAt }),
      });

    it('lists the probed connections subscribed until `until`, until they are removed', async () => {
      const stream = id('stream');
      const [a, b, later, other] = ['a', 'b', 'later', 'other'].map(id) as [
        string,
        string,
        string,
        string,
      ];
      await subscribe(a, stream, 1_000);
      await subscribe(b, stream, 2_000);
      await subscribe(later, stream, 5_000);
      await subscribe(other, id('elsewhere'), 1_000);
      const probe = { stream, until: 3_000, connectionIds: [a, b, later, other, id('never')] };
      const listed = await store.listedInIndex(probe);
      expect(ids(listed)).toEqual([a, b].sort());
      expect(listed.find((s) => s.connectionId === a)).toMatchObject({
        stream,
        identifier: `id-${stream}`,
        subscribedAt: 1_000,
      });
      await store.removeSubscription(a, stream, `id-${stream}`);
      expect(ids(await store.listedInIndex(probe))).toEqual([b]);
      expect(await store.listedInIndex({ ...probe, connectionIds: [] })).toEqual([]);
    });

    it('counts a subscription without `subscribedAt` (an earlier version stored it) as made until any time', async () => {
      const stream = id('stream');
      const old = id('old');
      await subscribe(old, stream);
      expect(ids(await store.listedInIndex({ stream, until: 0, connectionIds: [old] }))).toEqual([
        old,
      ]);
      expect(ids(await store.listedInIndex({ stream, until: 0 }))).toEqual([old]);
    });

    it('stream-wide, lists a subscriber made until `until` while the stream has one, past newer ones', async () => {
      const stream = id('stream');
      const newer = Array.from({ length: 30 }, () => id('newer'));
      for (const c of newer) await subscribe(c, stream, 9_000);
      expect(await store.listedInIndex({ stream, until: 5_000 })).toEqual([]);
      const made = id('made');
      await subscribe(made, stream, 4_000);
      expect(ids(await store.listedInIndex({ stream, until: 5_000 }))).toEqual([made]);
      // At most one per shard: the stream has one.
      expect(await store.listedInIndex({ stream, until: 10_000 })).toHaveLength(1);
      await store.removeSubscription(made, stream, `id-${stream}`);
      expect(await store.listedInIndex({ stream, until: 5_000 })).toEqual([]);
      expect(await store.listedInIndex({ stream: id('unknown'), until: 5_000 })).toEqual([]);
    });

    it('finds a subscriber in whichever shard it was placed, after the stream was spread', async () => {
      const stream = id('stream');
      // Placed in shard 0 under one shard; under four it would sit elsewhere.
      const early = idOffShardZero('early', 4);
      await subscribe(early, stream, 1_000);
      await store.spreadStream(stream, 4);
      const late = Array.from({ length: 12 }, () => id('late'));
      for (const c of late) await subscribe(c, stream, 2_000);
      const probe = { stream, until: 3_000 };
      expect(ids(await store.listedInIndex({ ...probe, connectionIds: [early, ...late] }))).toEqual(
        [early, ...late].sort(),
      );
      // Stream-wide: one per shard that holds any.
      const shards = new Set([0, ...late.map((c) => shardOf(c, 4))]);
      const wide = await store.listedInIndex(probe);
      expect(wide).toHaveLength(shards.size);
      for (const c of [early, ...late]) await store.removeSubscription(c, stream, `id-${stream}`);
      expect(await store.listedInIndex({ ...probe, connectionIds: [early, ...late] })).toEqual([]);
      expect(await store.listedInIndex(probe)).toEqual([]);
    });
  });
}
