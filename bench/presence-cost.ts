import { createConnectToken, signStreamName } from '../lib/core';
import { presenceReport, type Run } from './presence-report';
import { type BenchSecrets, type BenchStack, sleep } from './stack';
import type { Figure } from './util';
import { BenchClient, failures, inWaves, signedIdentifier } from './ws-clients';

/** Subscribed clients that never join: every presence change is posted to them too. */
const WATCHERS = 10;
/** Operations of each kind per run, one after another (each waits for its outcome). */
const OPS = 10;
/** The presence TTL the stack runs with (seconds), so that an expiry is seconds away. */
export const PRESENCE_BENCH_ENV = { LAMBDACABLE_PRESENCE_TTL: '2' } as const;
/** After the last outcome, the pollers still delete the batch: their calls belong to the run. */
const SETTLE_MS = 1_500;
const TIMEOUT_MS = 30_000;

/** The runs, each compared with the same operation without a presence event. */
const JOIN_NEW = 'join of a new id';
const JOIN_PRESENT = 'join of an id present (2nd session)';
const JOIN_AGAIN = 'join again (same session and id)';
const READ = 'presence read';
const LEAVE_NOT_LAST = 'leave, not the last session';
const LEAVE_LAST = 'leave, the last session';
const DISCONNECT = 'disconnect, no presence';
const EXPIRY = 'disconnect, then TTL expiry';
const AGAINST = {
  [JOIN_NEW]: JOIN_PRESENT,
  [LEAVE_LAST]: LEAVE_NOT_LAST,
  [EXPIRY]: DISCONNECT,
};

/** A presence message as a client gets it (`join`, `leave`, `info`, `error`). */
interface PresenceMessage {
  readonly type: string;
  readonly id?: string;
  readonly total?: number;
  readonly reason?: string;
}

/** A subscribed client and the presence messages it got. */
interface Member {
  readonly client: BenchClient;
  readonly got: PresenceMessage[];
}

/**
 * AWS requests and list price per presence operation on the local stack: raw `ws` clients
 * subscribed to one stream (`WATCHERS` that never join, and the members), then `OPS` of each
 * operation one after another, each waiting for its outcome: a join of a new id (every
 * subscriber has the `join`), a second session's join and a repeated join (their `wsDefault`
 * is done), a presence read (the `info` reply), a leave that is not the last and one that is,
 * a disconnect without presence, and disconnects whose presence expires after the TTL (every
 * subscriber has the `leave`). Only the calls made during a run count; the pinger's tick
 * Queries and pings are reported apart. The stack runs with {@link PRESENCE_BENCH_ENV}.
 */
export async function benchPresenceCost(
  bench: BenchStack,
  secrets: BenchSecrets,
): Promise<{ requests: Figure[]; cost: Figure[] }> {
  const { stack } = bench;
  const identifier = signedIdentifier(
    signStreamName('bench/presence', secrets.LAMBDACABLE_STREAMS_SECRET),
  );
  const roles = ['watcher', 'first', 'second', 'dropped'] as const;
  const counts = { watcher: WATCHERS, first: OPS, second: OPS, dropped: OPS };
  const tokens = await Promise.all(
    roles.flatMap((role) =>
      Array.from({ length: counts[role] }, (_, i) =>
        createConnectToken(
          { sub: `presence-${role}-${i}`, ttlSeconds: 600 },
          secrets.LAMBDACABLE_JWT_SECRET,
        ).then((token) => ({ role, token })),
      ),
    ),
  );
  const all: Member[] = [];
  const by = { watcher: [], first: [], second: [], dropped: [] } as Record<
    (typeof roles)[number],
    Member[]
  >;
  try {
    const outcomes = await inWaves(tokens, 20, async ({ role, token }) => {
      // pi=60: no ping falls into the counted windows.
      const client = await BenchClient.connect(stack.wsUrl, token, TIMEOUT_MS, { pi: '60' });
      const member: Member = { client, got: [] };
      client.ws.on('message', (data) => {
        const frame = JSON.parse(data.toString()) as { type?: string; message?: PresenceMessage };
        if (frame.type === 'presence' && frame.message) member.got.push(frame.message);
      });
      all.push(member);
      by[role].push(member);
      await client.subscribe(identifier, TIMEOUT_MS);
    });
    const failed = failures(outcomes);
    if (failed) throw new Error(`presence cost bench: clients failed: ${failed}`);
    const open = () => all.filter((m) => m.client.ws.readyState === m.client.ws.OPEN);
    const send = (m: Member, frame: Record<string, unknown>) =>
      m.client.ws.send(JSON.stringify({ ...frame, identifier }));
    const until = async (what: string, done: () => boolean) => {
      const deadline = Date.now() + TIMEOUT_MS;
      while (!done()) {
        const error = all.flatMap((m) => m.got).find((g) => g.type === 'error');
        if (error) throw new Error(`presence cost bench: presence error ${error.reason}`);
        if (Date.now() > deadline) throw new Error(`presence cost bench: no ${what} in time`);
        await sleep(5);
      }
    };
    /** Every open client got `type` for `id`. */
    const everyoneGot = (type: string, id: string) =>
      until(`${type} of ${id} at every subscriber`, () =>
        open().every((m) => m.got.some((g) => g.type === type && g.id === id)),
      );
    /** `n` more invocations of `fn` ended since `from`. */
    const ended = (fn: string, from: number, n: number) =>
      until(`${fn} invocation`, () => {
        const since = bench.offlineInvocations.slice(from);
        return since.filter((i) => i.functionName === fn).length >= n;
      });
    const measured = async (
      label: string,
      frames: number,
      body: () => Promise<void>,
    ): Promise<Run> => {
      const from = [
        bench.callLog.mark(),
        bench.pollerLog.mark(),
        bench.invocations.length,
        bench.offlineInvocations.length,
      ] as const;
      const changes = () =>
        all.reduce((n, m) => n + m.got.filter((g) => g.type !== 'info').length, 0);
      const before = changes();
      const started = Date.now();
      await body();
      const subscribers = open().length;
      await sleep(SETTLE_MS);
      return {
        label,
        ops: OPS,
        frames,
        subscribers,
        received: changes() - before,
        seconds: (Date.now() - started) / 1000,
        calls: bench.callLog.between(from[0], bench.callLog.mark()),
        pollerCalls: bench.pollerLog.between(from[1], bench.pollerLog.mark()),
        invocations: bench.invocations.slice(from[2]),
        offline: bench.offlineInvocations.slice(from[3]),
      };
    };
    const oneByOne = async (
      members: Member[],
      frame: (i: number) => Record<string, unknown>,
      outcome: (i: number, from: number) => Promise<void>,
    ) => {
      for (const [i, m] of members.entries()) {
        const from = bench.offlineInvocations.length;
        send(m, frame(i));
        await outcome(i, from);
      }
    };
    const join = (i: number) => ({ command: 'join', presence: { id: `member-${i}`, info: { i } } });
    const done = (_: number, from: number) => ended('wsDefault', from, 1);

    // Warm-up: cold starts and the schema lookup are not what a steady join costs.
    send(by.dropped[0]!, { command: 'join', presence: { id: 'dropped-0', info: { i: 0 } } });
    await everyoneGot('join', 'dropped-0');
    await sleep(SETTLE_MS);
    const runs: Run[] = [];
    const run = async (label: string, frames: number, body: () => Promise<void>) => {
      runs.push(await measured(label, frames, body));
    };
    await run(JOIN_NEW, OPS, () =>
      oneByOne(by.first, join, (i) => everyoneGot('join', `member-${i}`)),
    );
    await run(JOIN_PRESENT, OPS, () => oneByOne(by.second, join, done));
    await run(JOIN_AGAIN, OPS, () => oneByOne(by.first, join, done));
    await run(READ, OPS, () =>
      oneByOne(
        by.first,
        () => ({ command: 'presence', data: {} }),
        (i) => until('info reply', () => by.first[i]!.got.some((g) => g.type === 'info')),
      ),
    );
    const infoTotal = by.first[0]!.got.find((g) => g.type === 'info')?.total ?? 0;
    await run(LEAVE_NOT_LAST, OPS, () => oneByOne(by.second, () => ({ command: 'leave' }), done));
    await run(LEAVE_LAST, OPS, () =>
      oneByOne(
        by.first,
        () => ({ command: 'leave' }),
        (i) => everyoneGot('leave', `member-${i}`),
      ),
    );
    // Not measured: the other dropped clients join (the first did in the warm-up).
    for (const [i, m] of by.dropped.entries()) {
      if (i === 0) continue;
      send(m, { command: 'join', presence: { id: `dropped-${i}`, info: { i } } });
      await everyoneGot('join', `dropped-${i}`);
    }
    await sleep(SETTLE_MS);
    await run(DISCONNECT, 0, async () => {
      const from = bench.offlineInvocations.length;
      for (const m of by.second) m.client.close();
      await ended('wsDisconnect', from, OPS);
    });
    // At once: their departures fall due together, so one tick expires them all.
    await run(EXPIRY, 0, async () => {
      for (const m of by.dropped) m.client.close();
      for (let i = 0; i < OPS; i++) await everyoneGot('leave', `dropped-${i}`);
    });
    return presenceReport(runs, AGAINST, infoTotal);
  } finally {
    for (const m of all) m.client.close();
  }
}
