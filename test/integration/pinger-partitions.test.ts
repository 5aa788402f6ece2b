import { describe, expect, it } from 'vitest';
import { DynamoConnectionStore, DynamoPingerLayoutStore } from '../../lib/aws';
import {
  type ConnectionChange,
  type ConnectionRecord,
  type PartitionReport,
  PingerRuns,
  partitionScope,
} from '../../lib/core';
import { DEFAULT_LAYOUT } from '../../lib/realtime/keepalive/partitions';
import { MemoryPingerInvoker } from '../../lib/testing';
import { testResources } from '../helpers/aws';
import { FakeClock } from '../helpers/clock';

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('partitions');
  return shared;
};

function connection(connectionId: string): ConnectionRecord {
  return { connectionId, identity: '', sid: `sid-${connectionId}`, protocol: 'p', connectedAt: 1 };
}

async function all(pages: AsyncIterable<ConnectionChange[]>): Promise<ConnectionChange[]> {
  const out: ConnectionChange[] = [];
  for await (const page of pages) out.push(...page);
  return out;
}

const idOf = (c: ConnectionChange) =>
  c.kind === 'connection' ? c.connection.connectionId : c.subscription.connectionId;

describe('DynamoPingerLayoutStore', () => {
  it('reads the default layout until one is stored, and stores one only over the layout it read', async () => {
    const res = await resources();
    const layouts = new DynamoPingerLayoutStore({
      client: res.dynamodb,
      tableName: res.tables.connections,
    });
    expect(await layouts.layout()).toEqual(DEFAULT_LAYOUT);
    expect(await layouts.replaceLayout(DEFAULT_LAYOUT, { buckets: 16, partitions: 4 })).toBe(true);
    expect(await layouts.replaceLayout(DEFAULT_LAYOUT, { buckets: 64, partitions: 16 })).toBe(
      false,
    );
    expect(await layouts.layout()).toEqual({ buckets: 16, partitions: 4 });
    expect(
      await layouts.replaceLayout({ buckets: 16, partitions: 4 }, { buckets: 32, partitions: 8 }),
    ).toBe(true);
    expect(await layouts.layout()).toEqual({ buckets: 32, partitions: 8 });
  });

  it("keeps each partition's latest report: an earlier run's, written late, does not replace it", async () => {
    const res = await testResources('reports');
    const clock = new FakeClock();
    const layouts = new DynamoPingerLayoutStore({
      client: res.dynamodb,
      tableName: res.tables.connections,
      clock,
    });
    const at = clock.now();
    const r = (partition: number, startedAt: number, load: number): PartitionReport => ({
      partition,
      partitions: 2,
      connections: load * 3,
      load,
      startedAt,
      at,
    });
    await layouts.putReport(r(0, at, 10));
    await layouts.putReport(r(1, at, 20));
    await layouts.putReport(r(0, at - 60_000, 99)); // the previous minute's run, ending now
    await layouts.putReport(r(1, at, 25)); // the same run, at its end
    const reports = await layouts.reports();
    expect(reports.sort((a, b) => a.partition - b.partition)).toEqual([r(0, at, 10), r(1, at, 25)]);
    // Reports expire (and reads leave expired ones out: TTL deletion lags).
    clock.advance(2 * 3600_000);
    expect(await layouts.reports()).toEqual([]);
  });
});

describe('pinger partitions on DynamoDB', () => {
  it('grows B and K with the reported load, and the partitions still read what was written under the old B', async () => {
    const res = await testResources('growth');
    const clock = new FakeClock();
    const layouts = new DynamoPingerLayoutStore({
      client: res.dynamodb,
      tableName: res.tables.connections,
      clock,
    });
    // Writers read B from the layout on every write here (the functions cache it a minute).
    const store = new DynamoConnectionStore({
      client: res.dynamodb,
      tableName: res.tables.connections,
      buckets: async () => (await layouts.layout()).buckets,
    });
    const invoker = new MemoryPingerInvoker();
    const runs = new PingerRuns({ layouts, invoker, partitionRate: 200, clock });

    const old = Array.from({ length: 60 }, (_, i) => `old${i}-${res.prefix}=`);
    await Promise.all(old.map((id) => store.putConnection(connection(id))));
    await Promise.all(
      old.map((id) => store.addSubscription({ connectionId: id, stream: 's', identifier: id })),
    );
    const first = await runs.begin(undefined);
    expect(first.run).toEqual({ partition: 0, partitions: 1, buckets: 8 });

    // The last minute's one run saw 3,000 pings/s: 16 partitions of 200, over 64 buckets.
    await runs.report(first.run, clock.now(), {
      connections: 9000,
      load: 3000,
      sent: 0,
      spared: 0,
      welcomed: 0,
      gone: 0,
      failed: 0,
      reads: 0,
    });
    clock.advance(60_000);
    const second = await runs.begin(undefined);
    expect(second.run).toEqual({ partition: 0, partitions: 16, buckets: 64 });
    expect(invoker.started).toHaveLength(15);
    expect(await layouts.layout()).toEqual({ buckets: 64, partitions: 16 });

    const fresh = Array.from({ length: 60 }, (_, i) => `new${i}-${res.prefix}=`);
    await Promise.all(fresh.map((id) => store.putConnection(connection(id))));
    // A subscription stored under the new B for a connection stored under the old one.
    await Promise.all(
      old.map((id) => store.addSubscription({ connectionId: id, stream: 't', identifier: id })),
    );

    // The 16 partitions, each reading its buckets and keeping its connections, cover every
    // item once: the old ones (buckets 0..7) and the new ones (0..63).
    const layout = { buckets: 64, partitions: 16 };
    const kept = new Map<string, number>();
    let items = 0;
    for (let p = 0; p < 16; p++) {
      const scope = partitionScope(p, layout);
      const changes = (await all(store.changesSince(0, 25, scope.buckets))).filter((c) =>
        scope.owns(idOf(c)),
      );
      for (const c of changes) {
        if (c.kind === 'connection') kept.set(c.connection.connectionId, p);
        else expect(kept.get(c.subscription.connectionId) ?? p).toBe(p);
      }
      items += changes.filter((c) => idOf(c).endsWith(`-${res.prefix}=`)).length;
    }
    expect([...old, ...fresh].filter((id) => !kept.has(id))).toEqual([]);
    expect(items).toBe(old.length * 3 + fresh.length);
    // A read of every bucket under the current B finds them all too.
    const everything = (await all(store.changesSince(0, 100))).filter((c) =>
      idOf(c).endsWith(`-${res.prefix}=`),
    );
    expect(everything).toHaveLength(old.length * 3 + fresh.length);
  });
});
