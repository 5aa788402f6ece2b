import { type Cable, createCable } from '@anycable/core';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import WebSocket from 'ws';
import { commitDemoBroadcast } from '../infra/demo';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../infra/local-services';
import { freeStackPorts, type LocalStack, startLocalStack } from '../infra/local-stack';
import { createConnectToken, signStreamName } from '../lib';
import type { BenchResult } from './util';

const secrets = {
  LAMBDACABLE_JWT_SECRET: 'bench-jwt-secret',
  LAMBDACABLE_STREAMS_SECRET: 'bench-streams-secret',
  LAMBDACABLE_BROADCAST_KEY: 'bench-broadcast-key',
};
/** Simultaneous clients per run. */
const CROWDS = [50, 200] as const;
/** Committed broadcasts timed one after the other, to one subscriber. */
const COMMITS = 30;
/** How long a client may take to be welcomed and subscribed before it counts as failed. */
const CLIENT_TIMEOUT_MS = 60_000;

/** The `q` quantile (0..1) of `values`, nearest rank. */
function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

function percentiles(values: readonly number[]): string {
  const ms = (q: number) => `${Math.round(quantile(values, q))} ms`;
  return `p50 ${ms(0.5)}, p99 ${ms(0.99)}, max ${ms(1)}`;
}

/** A stock client with its defaults (monitor on, 3 s pings, 6 s stale threshold). */
function defaultCable(url: string, token: string): Cable {
  return createCable(url, {
    websocketImplementation: WebSocket,
    protocol: 'actioncable-v1-ext-json',
    logLevel: 'error',
    auth: { token },
  });
}

interface CrowdOutcome {
  readonly welcomeMs: number[];
  readonly subscribed: number;
  readonly errors: Map<string, number>;
  readonly ms: number;
}

/** `n` default clients connect at once, each subscribing to a signed stream. */
async function crowd(stack: LocalStack, n: number, run: string): Promise<CrowdOutcome> {
  const tokens = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      createConnectToken({ sub: `${run}-${i}`, ttlSeconds: 600 }, secrets.LAMBDACABLE_JWT_SECRET),
    ),
  );
  const signed = signStreamName(`bench/${run}`, secrets.LAMBDACABLE_STREAMS_SECRET);
  const cables: Cable[] = [];
  const welcomeMs: number[] = [];
  const errors = new Map<string, number>();
  let subscribed = 0;
  const started = performance.now();
  try {
    await Promise.all(
      tokens.map(async (token) => {
        const c = defaultCable(stack.wsUrl, token);
        cables.push(c);
        const t0 = performance.now();
        // The first welcome, not one after a reconnect the monitor made.
        c.once('connect', () => welcomeMs.push(performance.now() - t0));
        try {
          const channel = c.streamFromSigned(signed);
          await Promise.race([
            channel.ensureSubscribed(),
            new Promise((_, reject) =>
              setTimeout(() => reject(new Error('timed out')), CLIENT_TIMEOUT_MS),
            ),
          ]);
          subscribed++;
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          errors.set(reason, (errors.get(reason) ?? 0) + 1);
        }
      }),
    );
    return { welcomeMs, subscribed, errors, ms: performance.now() - started };
  } finally {
    for (const c of cables) c.disconnect();
  }
}

/** Commit → client: one subscriber, `COMMITS` transactions one after the other. */
async function commitLatency(stack: LocalStack, dynamodb: DynamoDBClient): Promise<number[]> {
  const token = await createConnectToken(
    { sub: 'latency', ttlSeconds: 600 },
    secrets.LAMBDACABLE_JWT_SECRET,
  );
  const c = defaultCable(stack.wsUrl, token);
  try {
    const channel = c.streamFromSigned(
      signStreamName('bench/latency', secrets.LAMBDACABLE_STREAMS_SECRET),
    );
    let arrived: ((at: number) => void) | undefined;
    channel.on('message', () => arrived?.(performance.now()));
    await channel.ensureSubscribed();
    const latencies: number[] = [];
    // The first one warms the functions up (cold starts), so it is not counted.
    for (let i = 0; i <= COMMITS; i++) {
      const received = new Promise<number>((resolve) => (arrived = resolve));
      const result = await commitDemoBroadcast({
        dynamodb,
        prefix: 'lambdacable-local',
        stream: 'bench/latency',
        data: JSON.stringify({ i }),
      });
      const committedAt = performance.now();
      if (!result.committed) throw new Error(`local stack bench: commit ${i} was cancelled`);
      const at = await Promise.race([
        received,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`broadcast ${i} never arrived`)), 30_000),
        ),
      ]);
      if (i > 0) latencies.push(at - committedAt);
    }
    return latencies;
  } finally {
    c.disconnect();
  }
}

/**
 * The local stack (`npm start` on free ports): commit → client latency through the outbox
 * stream, the relay, SQS and the broadcast consumer; and connect → welcome for crowds of
 * default-configured `@anycable/core` clients connecting at once, each then subscribing.
 */
export async function benchLocalStack(): Promise<BenchResult[]> {
  const stack = await startLocalStack({
    ...(await freeStackPorts()),
    env: secrets,
    output: 'quiet',
    watch: false,
  });
  const dynamodb = new DynamoDBClient({
    endpoint: stack.dynamodbEndpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    const results: BenchResult[] = [];
    const latency = await commitLatency(stack, dynamodb);
    const total = latency.reduce((a, b) => a + b, 0);
    results.push({
      name: `Commit → client, ${COMMITS} transactions one by one`,
      ops: COMMITS,
      ms: total,
      opsPerSec: (COMMITS / total) * 1000,
      extra: percentiles(latency),
    });
    for (const [i, n] of CROWDS.entries()) {
      const out = await crowd(stack, n, `crowd-${i}`);
      const failed = [...out.errors].map(([reason, count]) => `${count}× "${reason}"`).join(', ');
      results.push({
        name: `Connect → welcome, ${n} default clients at once`,
        ops: n,
        ms: out.ms,
        opsPerSec: (out.subscribed / out.ms) * 1000,
        ratio: `${out.subscribed}/${n} subscribed`,
        extra: `${percentiles(out.welcomeMs)}${failed ? `; failed: ${failed}` : ''}`,
      });
      // Let the disconnects of this crowd drain before the next one arrives.
      await new Promise((r) => setTimeout(r, 5_000));
    }
    return results;
  } finally {
    dynamodb.destroy();
    await stack.stop();
  }
}
