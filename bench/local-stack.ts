import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { type Cable, createCable } from '@anycable/core';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import WebSocket from 'ws';
import { commitDemoBroadcast } from '../infra/local/demo/demo';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../infra/local/services';
import type { LocalStack } from '../infra/local/stack';
import { createConnectToken, errorMessage, signStreamName } from '../lib/core';
import { type BenchSecrets, broadcastOverHttp, sleep } from './stack';
import type { BenchResult, Figure } from './util';
import { BenchClient, quantile, signedIdentifier } from './ws-clients';

/** Simultaneous clients per run. */
const CROWDS = [50, 200] as const;
/** Broadcasts timed one after the other, to one subscriber, per path. */
const COMMITS = 30;
/** `npm run demo:publish` processes timed one after the other. */
const DEMO_RUNS = 3;
/** How long a client may take to be welcomed and subscribed before it counts as failed. */
const CLIENT_TIMEOUT_MS = 60_000;
/** What the issue measured before: HTTP broadcast → client, and `npm run demo:publish`. */
const ISSUE_HTTP_MS = 700;
const ISSUE_DEMO_MS = 2_000;

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
async function crowd(
  stack: LocalStack,
  secrets: BenchSecrets,
  n: number,
  run: string,
): Promise<CrowdOutcome> {
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
          const reason = errorMessage(error);
          errors.set(reason, (errors.get(reason) ?? 0) + 1);
        }
      }),
    );
    return { welcomeMs, subscribed, errors, ms: performance.now() - started };
  } finally {
    for (const c of cables) c.disconnect();
  }
}

/** One subscriber of `stream`; `next()` resolves with the arrival time of the next frame. */
async function subscriber(
  stack: LocalStack,
  secrets: BenchSecrets,
  stream: string,
): Promise<{ next(): Promise<number>; close(): void }> {
  const token = await createConnectToken(
    { sub: `latency-${stream}`, ttlSeconds: 600 },
    secrets.LAMBDACABLE_JWT_SECRET,
  );
  const c = await BenchClient.connect(stack.wsUrl, token, CLIENT_TIMEOUT_MS);
  await c.subscribe(
    signedIdentifier(signStreamName(stream, secrets.LAMBDACABLE_STREAMS_SECRET)),
    CLIENT_TIMEOUT_MS,
  );
  let arrived: ((at: number) => void) | undefined;
  c.onBroadcast = (b) => arrived?.(b.at);
  return {
    next: () =>
      Promise.race([
        new Promise<number>((resolve) => (arrived = resolve)),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`no broadcast on ${stream} within 30 s`)), 30_000),
        ),
      ]),
    close: () => c.close(),
  };
}

/**
 * Broadcast → client, one subscriber, `COMMITS` broadcasts one after the other per path: a
 * service transaction (the outbox Put in a `TransactWriteItems`, as `npm run demo:publish`
 * commits it), timed from its commit; and `POST /_broadcast`, timed from the request. The
 * first of each warms the path up (cold starts) and is not counted.
 */
async function pathLatency(
  stack: LocalStack,
  secrets: BenchSecrets,
  dynamodb: DynamoDBClient,
): Promise<{ commit: number[]; http: number[]; httpAnswered: number[] }> {
  const commit: number[] = [];
  const http: number[] = [];
  const httpAnswered: number[] = [];
  const tx = await subscriber(stack, secrets, 'bench/latency-tx');
  try {
    for (let i = 0; i <= COMMITS; i++) {
      const received = tx.next();
      const result = await commitDemoBroadcast({
        dynamodb,
        prefix: 'lambdacable-local',
        stream: 'bench/latency-tx',
        data: JSON.stringify({ i }),
      });
      const committedAt = performance.now();
      if (!result.committed) throw new Error(`local stack bench: commit ${i} was cancelled`);
      const at = await received;
      if (i > 0) commit.push(at - committedAt);
    }
  } finally {
    tx.close();
  }
  const web = await subscriber(stack, secrets, 'bench/latency-http');
  try {
    for (let i = 0; i <= COMMITS; i++) {
      const received = web.next();
      const sent = performance.now();
      await broadcastOverHttp(stack, secrets, [
        { stream: 'bench/latency-http', data: JSON.stringify({ i }) },
      ]);
      const answered = performance.now();
      const at = await received;
      if (i > 0) {
        http.push(at - sent);
        httpAnswered.push(answered - sent);
      }
    }
  } finally {
    web.close();
  }
  return { commit, http, httpAnswered };
}

/**
 * `npm run demo:publish` as a user runs it: from the spawn to the client's receipt, and to
 * the process printing that it committed (the difference is commit → client).
 */
async function demoPublish(
  stack: LocalStack,
  secrets: BenchSecrets,
): Promise<{ total: number[]; committed: number[] }> {
  const total: number[] = [];
  const committed: number[] = [];
  const sub = await subscriber(stack, secrets, 'bench/demo');
  try {
    for (let i = 0; i < DEMO_RUNS; i++) {
      const received = sub.next();
      const t0 = performance.now();
      let printed: number | undefined;
      const child = spawn(
        'npm',
        ['run', 'demo:publish', '--', '--stream', 'bench/demo', '--data', JSON.stringify({ i })],
        {
          cwd: join(import.meta.dirname, '..'),
          env: { ...process.env, LAMBDACABLE_DYNAMODB_ENDPOINT: stack.dynamodbEndpoint },
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      );
      child.stdout.on('data', (chunk: Buffer) => {
        if (printed === undefined && chunk.toString().includes('committed')) {
          printed = performance.now() - t0;
        }
      });
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      const at = await received;
      await exited;
      total.push(at - t0);
      if (printed !== undefined) committed.push(printed);
    }
  } finally {
    sub.close();
  }
  return { total, committed };
}

/**
 * Broadcast → client latency on the local stack, through a service transaction (the outbox
 * path), over HTTP, and by `npm run demo:publish`; against what the issue measured.
 */
export async function benchPathLatency(
  stack: LocalStack,
  secrets: BenchSecrets,
): Promise<Figure[]> {
  const dynamodb = new DynamoDBClient({
    endpoint: stack.dynamodbEndpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    const { commit, http, httpAnswered } = await pathLatency(stack, secrets, dynamodb);
    const demo = await demoPublish(stack, secrets);
    const ms = (v: number) => `${Math.round(v)} ms`;
    const vs = (v: number, ref: number) => `${(v / ref).toFixed(2)}x`;
    const p50 = (v: readonly number[]) => quantile(v, 0.5);
    const p99 = (v: readonly number[]) => quantile(v, 0.99);
    return [
      {
        name: `Commit → client p50, ${COMMITS} transactions one by one`,
        value: ms(p50(commit)),
        reference: `${ms(ISSUE_DEMO_MS)} issue (demo:publish)`,
        ratio: vs(p50(commit), ISSUE_DEMO_MS),
        extra: percentiles(commit),
      },
      {
        name: `Commit → client p99, ${COMMITS} transactions one by one`,
        value: ms(p99(commit)),
        reference: `${ms(ISSUE_DEMO_MS)} issue (demo:publish)`,
        ratio: vs(p99(commit), ISSUE_DEMO_MS),
      },
      {
        name: `POST /_broadcast → client p50, ${COMMITS} one by one`,
        value: ms(p50(http)),
        reference: `${ms(ISSUE_HTTP_MS)} issue (HTTP)`,
        ratio: vs(p50(http), ISSUE_HTTP_MS),
        extra: `${percentiles(http)}; the POST answered in p50 ${ms(p50(httpAnswered))}`,
      },
      {
        name: `POST /_broadcast → client p99, ${COMMITS} one by one`,
        value: ms(p99(http)),
        reference: `${ms(ISSUE_HTTP_MS)} issue (HTTP)`,
        ratio: vs(p99(http), ISSUE_HTTP_MS),
      },
      {
        name: `npm run demo:publish → client p50, ${DEMO_RUNS} runs`,
        value: ms(p50(demo.total)),
        reference: `${ms(ISSUE_DEMO_MS)} issue (demo:publish)`,
        ratio: vs(p50(demo.total), ISSUE_DEMO_MS),
        extra:
          `${percentiles(demo.total)}; "committed" printed at p50 ${ms(p50(demo.committed))} ` +
          '(npm, tsx, module loading, schema lookup, the transaction), then → client ' +
          `p50 ${ms(p50(demo.total) - p50(demo.committed))}`,
      },
    ];
  } finally {
    dynamodb.destroy();
  }
}

/**
 * Connect → welcome for crowds of default-configured `@anycable/core` clients connecting at
 * once, each then subscribing.
 */
export async function benchCrowds(
  stack: LocalStack,
  secrets: BenchSecrets,
): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const [i, n] of CROWDS.entries()) {
    const out = await crowd(stack, secrets, n, `crowd-${i}`);
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
    await sleep(5_000);
  }
  return results;
}
