/**
 * Keepalive cost: the real {@link Pinger} over the in-memory store for one simulated minute
 * (a fake clock, so a minute takes a moment), counting the pings it posts and the items it
 * reads, per ping interval and with part of the connections on a busy stream. The counts
 * scale linearly with connections; the cost table prices them with bench/prices.ts.
 */
import type { Pinger } from '../lib/core';
import { CountingStore } from '../test/helpers/counting-store';
import { gatewayHarness } from '../test/helpers/gateway';
import { costOf, PRICES } from './prices';
import { type Figure, printFigures } from './util';

const TICK_MS = 250;
const RUN_MS = 60_000;
const BUCKETS = 8;
/** Bytes of a connection or subscription item as the pinger reads it (index projection). */
const ITEM_BYTES = 300;
const PINGER_MEMORY_MB = 512;

interface RunResult {
  readonly pingsPerConnectionHour: number;
  readonly itemsReadPerRun: number;
  readonly spared: number;
}

/** The gateway over the in-memory store and broker, on a fake clock; its pinger (3 s default). */
function inMemory() {
  const t = gatewayHarness({
    quiet: true,
    config: { allowAnonymous: true, publicStreams: true },
    store: (clock) => new CountingStore({ clock }),
  });
  const newPinger = () => t.pinger({ defaultInterval: 3 });
  /** `$connect` of connection `c<i>`, with `pi` when given. */
  const connect = (i: number, pi?: number) =>
    t.connect(`c${i}`, { sub: null, endpoint: null, ...(pi ? { query: { pi: String(pi) } } : {}) });
  /** One run (a simulated minute) of `pinger`, calling `each` before each tick. */
  const runMinute = (pinger: Pinger, each?: (t: number) => Promise<void>) =>
    t.tick(pinger, RUN_MS, { tickMs: TICK_MS, each });
  return { ...t, newPinger, connect, runMinute };
}

/** One pinger run over `n` connections; `busyShare` of them on a stream with a broadcast each second. */
async function simulate(n: number, pi: number | undefined, busyShare = 0): Promise<RunResult> {
  const { clock, store, api, broker, gateway, newPinger, connect, runMinute } = inMemory();
  for (let i = 0; i < n; i++) {
    const connectionId = `c${i}`;
    await connect(i, pi);
    await gateway.welcome(connectionId);
    if (i < n * busyShare) {
      const identifier = JSON.stringify({ channel: '$pubsub', stream_name: 'busy' });
      await gateway.receive(connectionId, JSON.stringify({ command: 'subscribe', identifier }));
    }
  }
  clock.advance(90_000); // an earlier run welcomed them, and its late reads are behind
  api.clear();
  const pinger = newPinger();
  await pinger.start();
  await runMinute(pinger, async (t) => {
    if (busyShare > 0 && t % 1000 === 0) {
      await broker.handleBroadcast({ stream: 'busy', data: JSON.stringify({ t }) });
    }
  });
  const pings = api.posted.filter((p) => p.frame.startsWith('{"type":"ping"')).length;
  return {
    pingsPerConnectionHour: (pings / n) * 60,
    itemsReadPerRun: store.itemsRead,
    spared: pinger.report().spared,
  };
}

/**
 * Items the pinger reads per new connection in its run: its connection item, on every tick
 * within the read overlap and every late read within the late window.
 */
async function readsPerNewConnection(n: number): Promise<number> {
  const { store, newPinger, connect, runMinute } = inMemory();
  const pinger = newPinger();
  await pinger.start();
  for (let i = 0; i < n; i++) await connect(i);
  await runMinute(pinger);
  if (pinger.report().welcomed !== n) throw new Error('not every new connection was welcomed');
  return store.itemsRead / n;
}

/** Pinger cost per hour that does not depend on connections: the function and its ticks. */
function fixedPerHour(): number {
  // A late read is one tick's Queries reaching further back: its items are the new
  // connections' cost (readsPerNewConnection), not a fixed one.
  const queries = BUCKETS * (3_600_000 / TICK_MS);
  return costOf({
    lambdaGbSeconds: 3600 * (PINGER_MEMORY_MB / 1024),
    lambdaRequests: 60,
    dynamodbReadUnits: queries * 0.5, // an empty Query costs one eventually consistent read
  }).total;
}

/** Keepalive cost per hour of `connections` at `pingsPerConnectionHour`, one first read a minute. */
function perHour(connections: number, r: RunResult, n: number): number {
  const itemsPerRun = (r.itemsReadPerRun / n) * connections;
  return (
    fixedPerHour() +
    costOf({
      apiGatewayMessages: connections * r.pingsPerConnectionHour,
      apiGatewayConnectionMinutes: connections * 60,
      dynamodbReadUnits: 60 * Math.ceil((itemsPerRun * ITEM_BYTES) / 4096) * 0.5,
    }).total
  );
}

const usd = (x: number) => `$${x < 1 ? x.toFixed(4) : x.toFixed(2)}`;

/** Pings per connection-hour of a run, against the default's 1,200. */
function pingFigure(setting: string, run: RunResult, reference: string, digits: number): Figure {
  return {
    name: `pings per connection-hour, ${setting}`,
    value: run.pingsPerConnectionHour.toFixed(0),
    reference,
    ratio: `${(run.pingsPerConnectionHour / 1200).toFixed(digits)}×`,
  };
}

export async function benchKeepalive(): Promise<Figure[]> {
  const n = 1_000;
  const byDefault = await simulate(n, undefined);
  const at30 = await simulate(n, 30);
  const at60 = await simulate(n, 60);
  const busy = await simulate(n, undefined, 0.5);
  const perConnect = await readsPerNewConnection(n);
  // The pinger before: every connection every 3 s, and every round read every connection.
  const oldReadsPerRun = n * 20;
  const figures: Figure[] = [
    pingFigure('default (3 s)', byDefault, '1200 (one per 3 s)', 2),
    pingFigure('pi=30', at30, '1200 (default)', 3),
    pingFigure('pi=60', at60, '1200 (default)', 3),
    {
      ...pingFigure('half on a stream with 1 broadcast/s', busy, '1200 (default)', 2),
      extra: `(${busy.spared} pings spared)`,
    },
    {
      name: `items read per run (1 min), ${n} connections`,
      value: String(byDefault.itemsReadPerRun),
      reference: `${oldReadsPerRun} (all, every round)`,
      ratio: `${(byDefault.itemsReadPerRun / oldReadsPerRun).toFixed(3)}×`,
      extra: `same at pi=30: ${at30.itemsReadPerRun}`,
    },
    {
      name: 'items read per new connection (the ticks within 1 s, the late reads within 35 s)',
      value: perConnect.toFixed(1),
      reference: `${Math.ceil(1000 / TICK_MS) + 1} (the ticks alone)`,
      ratio: `${(perConnect / (Math.ceil(1000 / TICK_MS) + 1)).toFixed(1)}×`,
      extra: `${usd(((perConnect * ITEM_BYTES) / 4096) * 0.5 * PRICES.dynamodbReadUnit * 1e6)} per million connects`,
    },
    {
      name: 'pinger fixed cost per hour (512 MB, 8 bucket Queries per tick)',
      value: usd(fixedPerHour()),
      reference: '-',
      ratio: '-',
    },
  ];
  for (const connections of [1_000, 10_000, 100_000]) {
    const defaultCost = perHour(connections, byDefault, n);
    for (const [label, r] of [
      ['pi=30', at30],
      ['pi=60', at60],
    ] as const) {
      const cost = perHour(connections, r, n);
      figures.push({
        name: `keepalive per month, ${connections.toLocaleString('en-US')} connections, ${label}`,
        value: usd(cost * 730),
        reference: `${usd(defaultCost * 730)} (3 s)`,
        ratio: `${(cost / defaultCost).toFixed(3)}×`,
        extra: `connection minutes alone ${usd(connections * 60 * 730 * PRICES.apiGatewayConnectionMinute)}`,
      });
    }
  }
  return figures;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printFigures('Keepalive (the Pinger over one simulated minute)', await benchKeepalive());
}
