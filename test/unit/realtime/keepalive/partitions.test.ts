import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  cachedBuckets,
  MessageFormatError,
  type PartitionRun,
  type Pinger,
  PingerRuns,
} from '../../../../lib/core';
import {
  bucketOf,
  DEFAULT_LAYOUT,
  estimateLoad,
  type PartitionReport,
  type PingerLayout,
  partitionScope,
  planLayout,
  REPORT_MAX_AGE_MS,
  usableLayout,
} from '../../../../lib/realtime/keepalive/partitions';
import { partitionRunOf } from '../../../../lib/realtime/keepalive/runs';
import {
  MemoryConnectionStore,
  MemoryPingerInvoker,
  MemoryPingerLayoutStore,
} from '../../../../lib/testing';
import { FakeClock } from '../../../helpers/clock';
import { EXT, gatewayHarness, RecordingLogger } from '../../../helpers/gateway';

/** API Gateway's connection ids look random: 16 base64 characters. */
const connectionId = (i: number) =>
  `${createHash('sha256').update(String(i)).digest('base64').slice(0, 15)}=`;
const ids = (n: number) => Array.from({ length: n }, (_, i) => connectionId(i));

function report(partition: number, partitions: number, load: number, at: number): PartitionReport {
  return { partition, partitions, connections: load * 3, load, startedAt: at - 1000, at };
}

describe('partitions: buckets and scopes', () => {
  it('keeps a connection in one bucket under B, the same for its whole life', () => {
    for (const id of ids(1000)) {
      for (const b of [8, 16, 256]) {
        expect(bucketOf(id, b)).toBeGreaterThanOrEqual(0);
        expect(bucketOf(id, b)).toBeLessThan(b);
        expect(bucketOf(id, b)).toBe(bucketOf(id, b));
      }
      // A smaller B is a coarser view of the same hash: stored under 8, the bucket is the one under 64 mod 8.
      expect(bucketOf(id, 64) % 8).toBe(bucketOf(id, 8));
    }
  });

  it("gives each connection to exactly one partition, which reads the bucket it was stored in under any B up to today's", () => {
    const layout: PingerLayout = { buckets: 256, partitions: 64 };
    const scopes = Array.from({ length: 64 }, (_, i) => partitionScope(i, layout));
    for (const id of ids(2000)) {
      const owners = scopes.filter((s) => s.owns(id));
      expect(owners).toHaveLength(1);
      for (const storedUnder of [8, 16, 32, 64, 128, 256]) {
        expect(owners[0]!.buckets).toContain(bucketOf(id, storedUnder));
      }
    }
    // Its own buckets (4 = B / K) and one older bucket per B' under K (8, 16, 32).
    expect(Math.max(...scopes.map((s) => s.buckets.length))).toBe(4 + 3);
  });

  it('lets one partition read and keep everything', () => {
    const scope = partitionScope(0, DEFAULT_LAYOUT);
    expect(scope.buckets).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(ids(100).every((id) => scope.owns(id))).toBe(true);
  });

  it('spreads connections evenly over the partitions', () => {
    const layout: PingerLayout = { buckets: 256, partitions: 64 };
    const counts = new Array(64).fill(0);
    for (const id of ids(20_000)) counts[bucketOf(id, layout.partitions)]++;
    expect(Math.max(...counts)).toBeLessThan(1.3 * (20_000 / 64));
  });
});

describe('partitions: the plan', () => {
  const now = Date.UTC(2100, 0, 1);

  it('keeps one partition while all pings fit in one partition rate', () => {
    expect(planLayout(DEFAULT_LAYOUT, 150, 200)).toEqual(DEFAULT_LAYOUT);
    expect(planLayout(DEFAULT_LAYOUT, 0, 200)).toEqual(DEFAULT_LAYOUT);
  });

  it('plans K as the power of two at or above load / rate, and raises B to 4 K', () => {
    // 20,000 connections pinged every 3 s: 6,667 pings/s, 34 partitions' worth.
    expect(planLayout(DEFAULT_LAYOUT, 20_000 / 3, 200)).toEqual({ buckets: 256, partitions: 64 });
    expect(planLayout(DEFAULT_LAYOUT, 201, 200)).toEqual({ buckets: 8, partitions: 2 });
    expect(planLayout(DEFAULT_LAYOUT, 700, 200)).toEqual({ buckets: 16, partitions: 4 });
  });

  it('never lowers B, and keeps K at B / 32 or more so that a partition reads at most 32 buckets', () => {
    expect(planLayout({ buckets: 256, partitions: 64 }, 10, 200)).toEqual({
      buckets: 256,
      partitions: 8,
    });
    expect(planLayout({ buckets: 16, partitions: 4 }, 10, 200)).toEqual({
      buckets: 16,
      partitions: 1,
    });
  });

  it('stops at 4,096 partitions', () => {
    expect(planLayout(DEFAULT_LAYOUT, 1e9, 200)).toEqual({ buckets: 16_384, partitions: 4096 });
  });

  it('keeps the layout when no report tells the load', () => {
    const layout = { buckets: 64, partitions: 8 };
    expect(planLayout(layout, undefined, 200)).toBe(layout);
  });

  it("estimates the load from the current minute's reports, a missing partition counting as the mean", () => {
    const layout = { buckets: 16, partitions: 4 };
    const reports = [report(0, 4, 100, now), report(1, 4, 300, now), report(3, 4, 200, now)];
    expect(estimateLoad(layout, reports, now)).toBe(800);
  });

  it('ignores reports of another K and stale ones', () => {
    const layout = { buckets: 16, partitions: 2 };
    const reports = [
      report(0, 2, 100, now),
      report(1, 2, 50, now - REPORT_MAX_AGE_MS - 1),
      report(2, 4, 999, now),
      report(0, 1, 999, now),
    ];
    expect(estimateLoad(layout, reports, now)).toBe(200);
    expect(estimateLoad(layout, [report(1, 2, 50, now - REPORT_MAX_AGE_MS - 1)], now)).toBe(
      undefined,
    );
  });

  it('reads a damaged layout as one partition over B rounded up (never fewer buckets)', () => {
    expect(usableLayout({ buckets: 48, partitions: 3 })).toEqual({ buckets: 64, partitions: 1 });
    expect(usableLayout({ buckets: Number.NaN, partitions: 1 })).toEqual(DEFAULT_LAYOUT);
  });
});

describe('PingerRuns', () => {
  const setup = () => {
    const clock = new FakeClock();
    const layouts = new MemoryPingerLayoutStore();
    const invoker = new MemoryPingerInvoker();
    const logger = new RecordingLogger();
    const runs = new PingerRuns({ layouts, invoker, partitionRate: 200, clock, logger });
    return { clock, layouts, invoker, logger, runs };
  };

  it('runs one partition, starting no other, without reports (as before partitions)', async () => {
    const t = setup();
    const plan = await t.runs.begin({});
    expect(plan.run).toEqual({ partition: 0, partitions: 1, buckets: 8 });
    expect(t.invoker.started).toEqual([]);
    expect(await t.layouts.layout()).toEqual(DEFAULT_LAYOUT);
  });

  it('plans from the last reports, stores the layout and starts partitions 1..K-1', async () => {
    const t = setup();
    await t.layouts.putReport(report(0, 1, 20_000 / 3, t.clock.now()));
    const plan = await t.runs.begin({ 'detail-type': 'Scheduled Event' });
    expect(plan.run).toEqual({ partition: 0, partitions: 64, buckets: 256 });
    expect(plan.started).toBe(63);
    expect(t.invoker.started.map((r) => r.partition)).toEqual(
      Array.from({ length: 63 }, (_, i) => i + 1),
    );
    expect(t.invoker.started.every((r) => r.partitions === 64 && r.buckets === 256)).toBe(true);
    expect(await t.layouts.layout()).toEqual({ buckets: 256, partitions: 64 });
  });

  it('runs the partition of its event as a worker, planning nothing', async () => {
    const t = setup();
    const plan = await t.runs.begin({ partition: 3, partitions: 4, buckets: 16 });
    expect(plan.run).toEqual({ partition: 3, partitions: 4, buckets: 16 });
    expect(plan.scope.buckets).toEqual([3, 7, 11, 15]);
    expect(t.invoker.started).toEqual([]);
  });

  it('refuses a worker event whose partition does not fit its layout', () => {
    for (const event of [
      { partition: 4, partitions: 4, buckets: 16 },
      { partition: 0, partitions: 3, buckets: 16 },
      { partition: 0, partitions: 32, buckets: 16 },
      { partition: '1', partitions: 2, buckets: 8 },
    ]) {
      expect(() => partitionRunOf(event), JSON.stringify(event)).toThrow(MessageFormatError);
    }
  });

  it('logs a partition it could not start and runs its own', async () => {
    const t = setup();
    const runs = new PingerRuns({
      layouts: t.layouts,
      invoker: {
        start: async (run: PartitionRun) => {
          if (run.partition === 2) throw new Error('throttled');
        },
      },
      partitionRate: 200,
      clock: t.clock,
      logger: t.logger,
    });
    await t.layouts.putReport(report(0, 1, 700, t.clock.now()));
    const plan = await runs.begin(undefined);
    expect(plan).toMatchObject({ started: 2, failed: 1, run: { partition: 0, partitions: 4 } });
    expect(t.logger.at('error').map((e) => e.message)).toContain('pinger partition not started');
  });

  it('plans again over the layout another coordinator stored first', async () => {
    const t = setup();
    await t.layouts.putReport(report(0, 1, 700, t.clock.now()));
    let raced = false;
    const layouts = Object.assign(Object.create(t.layouts), {
      replaceLayout: async (current: PingerLayout, next: PingerLayout) => {
        if (!raced) {
          raced = true;
          await t.layouts.replaceLayout(current, { buckets: 32, partitions: 8 });
          return false;
        }
        return t.layouts.replaceLayout(current, next);
      },
    });
    const runs = new PingerRuns({
      layouts,
      invoker: t.invoker,
      partitionRate: 200,
      clock: t.clock,
    });
    const plan = await runs.begin(undefined);
    // The stored layout says 8 partitions; the one report is of K = 1, so no load is known.
    expect(plan.run).toEqual({ partition: 0, partitions: 8, buckets: 32 });
  });
});

describe('cachedBuckets', () => {
  it('reads the layout at most once a minute and keeps the last B when a read fails', async () => {
    const clock = new FakeClock();
    const layouts = new MemoryPingerLayoutStore();
    let reads = 0;
    let fail = false;
    const counted = {
      layout: async () => {
        reads++;
        if (fail) throw new Error('throttled');
        return layouts.layout();
      },
    };
    const buckets = cachedBuckets(counted, { clock });
    expect(await buckets()).toBe(8);
    await layouts.replaceLayout(DEFAULT_LAYOUT, { buckets: 32, partitions: 8 });
    expect(await buckets()).toBe(8);
    expect(reads).toBe(1);
    clock.advance(60_000);
    expect(await buckets()).toBe(32);
    fail = true;
    clock.advance(60_000);
    expect(await buckets()).toBe(32);
    expect(reads).toBe(3);
  });
});

/** A minute of the pinger, as functions/pinger.ts runs it, over the memory adapters. */
interface Run {
  readonly partition: number;
  readonly partitions: number;
  readonly pinger: Pinger;
  readonly startedAt: number;
  reported: boolean;
}

describe('pinger partitions over memory: 20,000 connections pinged every 3 s', () => {
  it('welcomes and pings every connection within its interval, no partition keeping more than its share', async () => {
    const TICK = 250;
    const INTERVAL = 3000;
    const TOTAL = 20_000;
    const clock = new FakeClock();
    const layouts = new MemoryPingerLayoutStore();
    // Writers see B as the functions do: the layout read at most once a minute.
    const realtime = gatewayHarness({
      clock,
      quiet: true,
      config: { allowAnonymous: true },
      store: () => new MemoryConnectionStore({ clock, buckets: cachedBuckets(layouts, { clock }) }),
    });
    const { api } = realtime;
    const invoker = new MemoryPingerInvoker();
    const runs = new PingerRuns({ layouts, invoker, partitionRate: 200, clock });

    let active: Run[] = [];
    const startMinute = async () => {
      invoker.started.length = 0;
      const plans = [await runs.begin(undefined)];
      for (const run of [...invoker.started]) plans.push(await runs.begin(run));
      for (const plan of plans) {
        active.push({
          ...plan.run,
          pinger: realtime.pinger({ defaultInterval: INTERVAL / 1000, scope: plan.scope }),
          startedAt: clock.now(),
          reported: false,
        });
      }
      return plans.length;
    };

    const welcomes = new Map<string, number>();
    const lastFrame = new Map<string, number>();
    let maxGap = 0;
    const minutes: { partitions: number; tracked: number[]; loads: number[] }[] = [];
    let connected = 0;
    // Connections arrive over the first 2 minutes (the last minutes see them all), none leaves.
    const perTick = Math.ceil(TOTAL / ((2 * 60_000) / TICK));
    for (let t = 0; t < 6 * 60_000; t += TICK) {
      if (t % 60_000 === 0) {
        const partitions = await startMinute();
        minutes.push({ partitions, tracked: [], loads: [] });
      }
      for (let i = 0; i < perTick && connected < TOTAL; i++, connected++) {
        await realtime.gateway.connect({
          connectionId: connectionId(connected),
          query: {},
          protocols: EXT,
        });
      }
      for (const run of active) {
        await run.pinger.tick(run.startedAt + 65_000);
        if (!run.reported) {
          run.reported = true;
          await runs.report(run, run.startedAt, run.pinger.report());
          const minute = minutes.at(-1)!;
          if (run.startedAt === clock.now()) {
            minute.tracked.push(run.pinger.report().connections);
            minute.loads.push(run.pinger.report().load);
          }
        }
      }
      const now = clock.now();
      for (const { connectionId, frame } of api.posted) {
        if (frame.startsWith('{"type":"welcome"')) {
          welcomes.set(connectionId, (welcomes.get(connectionId) ?? 0) + 1);
        }
        const last = lastFrame.get(connectionId);
        if (last !== undefined) maxGap = Math.max(maxGap, now - last);
        lastFrame.set(connectionId, now);
      }
      api.clear();
      clock.advance(TICK);
      const ending = active.filter((r) => clock.now() >= r.startedAt + 62_000);
      for (const run of ending) await runs.report(run, run.startedAt, run.pinger.report());
      active = active.filter((r) => !ending.includes(r));
    }

    // Every connection was welcomed once, and heard from within an interval and a half.
    expect(welcomes.size).toBe(TOTAL);
    expect([...welcomes.values()].every((n) => n === 1)).toBe(true);
    expect(maxGap).toBeLessThanOrEqual(1.5 * INTERVAL);
    const now = clock.now();
    expect([...lastFrame.values()].every((at) => now - at <= INTERVAL + TICK)).toBe(true);

    // The plan follows the connections: one partition at first, then 64 (6,667 pings/s at 200 each).
    expect(minutes[0]!.partitions).toBe(1);
    expect(minutes.at(-1)!.partitions).toBe(64);
    expect(await layouts.layout()).toEqual({ buckets: 256, partitions: 64 });
    for (const minute of minutes.slice(-2)) {
      expect(minute.partitions).toBe(64);
      // Every connection in exactly one partition, each partition near its share and under its rate.
      expect(minute.tracked.reduce((a, b) => a + b, 0)).toBe(TOTAL);
      expect(Math.max(...minute.tracked)).toBeLessThan(1.3 * (TOTAL / 64));
      expect(Math.max(...minute.loads)).toBeLessThanOrEqual(200);
    }
  }, 240_000);
});
