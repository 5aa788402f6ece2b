import { type ChildProcess, fork } from 'node:child_process';
import { createConnectToken, signStreamName } from '../lib/core';
import { type BenchSecrets, type BenchStack, broadcastOverHttp } from './stack';
import type { Figure } from './util';
import { BenchClient, failures, inWaves, quantile, signedIdentifier } from './ws-clients';

/** Subscribers of the one stream. */
export const FANOUT_CLIENTS = 1_000;
/** Broadcasts timed, one after the other (after one warm-up broadcast). */
const ROUNDS = 10;
/** Clients connecting (and then subscribing) at once. */
const WAVE = 100;
const CLIENT_TIMEOUT_MS = 30_000;
const ROUND_TIMEOUT_MS = 30_000;
/** The goal: p99 on the local stack within this many times the floor's. */
const GOAL_RATIO = 5;

interface Target {
  readonly name: string;
  connect(i: number): Promise<BenchClient>;
  readonly identifier: string;
  /** Sends broadcast `round`; resolves when the server answered. */
  broadcast(round: number): Promise<void>;
}

interface Outcome {
  readonly connected: number;
  readonly failed: string;
  readonly connectMs: number;
  /** POST sent → frame received, every client and round. */
  readonly latencies: number[];
  /** Frames that did not arrive within the round's timeout. */
  readonly missing: number;
  /** POST sent → the round's first frame received. */
  readonly first: number[];
}

/** Connects `FANOUT_CLIENTS` clients, subscribes each, then times `ROUNDS` broadcasts. */
async function run(target: Target): Promise<Outcome> {
  const clients: BenchClient[] = [];
  const started = performance.now();
  try {
    const outcomes = await inWaves(
      Array.from({ length: FANOUT_CLIENTS }, (_, i) => i),
      WAVE,
      async (i) => {
        const c = await target.connect(i);
        clients.push(c);
        await c.subscribe(target.identifier, CLIENT_TIMEOUT_MS);
        return c;
      },
    );
    const connectMs = performance.now() - started;
    const subscribed = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    const latencies: number[] = [];
    const first: number[] = [];
    let missing = 0;
    for (let round = 0; round <= ROUNDS; round++) {
      const arrived: number[] = [];
      for (const c of subscribed) {
        c.onBroadcast = (b) => {
          if ((b.message as { round?: number } | null)?.round === round) arrived.push(b.at);
        };
      }
      const sent = performance.now();
      await target.broadcast(round);
      const deadline = Date.now() + ROUND_TIMEOUT_MS;
      while (arrived.length < subscribed.length && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      // The first broadcast warms the functions up (cold starts), so it is not counted.
      if (round === 0) continue;
      latencies.push(...arrived.map((at) => at - sent));
      if (arrived.length > 0) first.push(Math.min(...arrived) - sent);
      missing += subscribed.length - arrived.length;
    }
    return {
      connected: subscribed.length,
      failed: failures(outcomes),
      connectMs,
      latencies,
      missing,
      first,
    };
  } finally {
    for (const c of clients) c.close();
  }
}

/** The floor server in its own process; resolves with its port. */
async function startFloor(): Promise<{ port: number; child: ChildProcess }> {
  const child = fork(new URL('./ws-floor-server.ts', import.meta.url), {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`ws floor server exited (${code})`)));
  });
  return { port, child };
}

const ms = (v: number) => `${Math.round(v)} ms`;

/**
 * Delivery to `FANOUT_CLIENTS` subscribers of one stream: POST → each client's receipt on
 * the local stack (the whole path: HTTP broadcast, outbox, stream, relay, SQS, broadcast
 * function, one post per subscriber) against a bare `ws` server that sends each broadcast to
 * its subscribers, measured by the same clients.
 *
 * `microsPerPost` (the `PostToConnection` bench: the SDK's CPU per post, with nothing else
 * on the core) gives the least p99 one broadcast invocation can reach: its thread signs and
 * sends the posts one after another, so the p99th frame leaves at least that many posts'
 * CPU after the first one.
 */
export async function benchFanoutLatency(
  bench: BenchStack,
  secrets: BenchSecrets,
  microsPerPost: number,
): Promise<Figure[]> {
  const { stack } = bench;
  const stream = 'bench/fanout';
  const signed = signStreamName(stream, secrets.LAMBDACABLE_STREAMS_SECRET);
  const tokens = await Promise.all(
    Array.from({ length: FANOUT_CLIENTS }, (_, i) =>
      createConnectToken({ sub: `fanout-${i}`, ttlSeconds: 600 }, secrets.LAMBDACABLE_JWT_SECRET),
    ),
  );
  const from = bench.invocations.length;
  const ours = await run({
    name: 'local stack',
    identifier: signedIdentifier(signed),
    // A production setting (pi=60): the pinger's pings would otherwise share serverless-offline's
    // one thread with the fan-out under test (on AWS they do not compete).
    connect: (i) => BenchClient.connect(stack.wsUrl, tokens[i], CLIENT_TIMEOUT_MS, { pi: '60' }),
    broadcast: (round) =>
      broadcastOverHttp(stack, secrets, [{ stream, data: JSON.stringify({ round }) }]),
  });

  // The broadcast function's invocations of the timed rounds (the first one is the warm-up).
  const fanouts = bench.invocations
    .slice(from)
    .filter((i) => i.functionName.endsWith('-broadcast'))
    .slice(1)
    .map((i) => i.ms);
  const floor = await startFloor();
  let base: Outcome;
  try {
    const url = `http://127.0.0.1:${floor.port}`;
    base = await run({
      name: 'ws floor',
      identifier: signedIdentifier(signed),
      connect: () => BenchClient.connect(`ws://127.0.0.1:${floor.port}`, undefined, 10_000),
      broadcast: async (round) => {
        const res = await fetch(`${url}/broadcast`, {
          method: 'POST',
          body: JSON.stringify({ stream: signed, message: { round } }),
        });
        if (res.status !== 201) throw new Error(`ws floor: broadcast answered ${res.status}`);
      },
    });
  } finally {
    floor.child.kill();
  }

  const p = (o: Outcome, q: number) => quantile(o.latencies, q);
  const describe = (o: Outcome) =>
    `${o.connected}/${FANOUT_CLIENTS} subscribed in ${(o.connectMs / 1000).toFixed(1)} s` +
    `${o.failed ? ` (failed: ${o.failed})` : ''}, ${o.latencies.length} frames timed` +
    `${o.missing ? `, ${o.missing} missing` : ''}, max ${ms(p(o, 1))}`;
  const goal = GOAL_RATIO * p(base, 0.99);
  const postsBeforeP99 = Math.ceil(0.99 * FANOUT_CLIENTS) - 1;
  const firstP50 = quantile(ours.first, 0.5);
  const least = firstP50 + (postsBeforeP99 * microsPerPost) / 1000;
  return [
    {
      name: `POST → client p50, ${FANOUT_CLIENTS} subscribers, local stack`,
      value: ms(p(ours, 0.5)),
      reference: `${ms(p(base, 0.5))} ws floor`,
      ratio: `${(p(ours, 0.5) / p(base, 0.5)).toFixed(1)}x`,
      extra:
        `${describe(ours)}; first frame p50 ${ms(firstP50)}, the broadcast ` +
        `function's invocation p50 ${ms(quantile(fanouts, 0.5))} (query + ${FANOUT_CLIENTS} posts)`,
    },
    {
      name: `POST → client p99, ${FANOUT_CLIENTS} subscribers, local stack`,
      value: ms(p(ours, 0.99)),
      reference: `${ms(p(base, 0.99))} ws floor`,
      ratio: `${(p(ours, 0.99) / p(base, 0.99)).toFixed(1)}x (goal ≤ ${GOAL_RATIO}x)`,
      extra: `floor: ${describe(base)}`,
    },
    {
      name: 'least p99 with one invocation per broadcast',
      value: ms(least),
      reference: `${ms(goal)} (the goal: ${GOAL_RATIO}x the floor's p99)`,
      ratio: `${(least / goal).toFixed(2)}x`,
      extra:
        `first frame p50 + ${postsBeforeP99} × ${Math.round(microsPerPost)} µs, the SDK's CPU ` +
        `per post alone; above 1x the goal is out of reach while one invocation makes every post`,
    },
  ];
}
