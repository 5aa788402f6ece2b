import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LOCAL_PREFIX } from '../infra/local/environment';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../infra/local/services';
import { freeStackPorts, startLocalStack } from '../infra/local/stack';
import { DynamoConnectionStore } from '../lib/aws';
import type { FanoutTaskReport } from '../lib/core';
import { forEachConcurrently } from '../lib/kernel/concurrency';
import { LambdaStandIn } from './lambda-stand-in';
import { ManagementStandIn, wrongDeliveries } from './management-stand-in';

/** Options of {@link runLocalScale}. */
export interface LocalScaleOptions {
  /** Stand-in connections subscribed to the stream. */
  readonly subscribers: number;
  /** Broadcasts (at least 2): the first and second alone (each timed), the rest back to back. */
  readonly frames: number;
  /** The stand-in's accepted posts per second; the rest answer 429. */
  readonly ratePerSecond: number;
  /**
   * Posts the stand-in accepts at once before its rate applies.
   * @default a tenth of a second's worth of `ratePerSecond`
   */
  readonly burst?: number;
  /**
   * `deliver` invocations running at once past which Invoke answers 429
   * `TooManyRequestsException` (a Lambda stand-in in front of serverless-offline's, which runs
   * every Invoke at once). @default unlimited: no stand-in
   */
  readonly invokeConcurrency?: number;
  /** The most time for every frame to reach every subscriber, in ms. */
  readonly timeoutMs?: number;
  /** Progress lines. @default none */
  readonly log?: (line: string) => void;
}

/** What {@link runLocalScale} measured: the `local` object of `npm run bench -- scale --json`. */
export interface LocalScaleResult {
  readonly subscribers: number;
  readonly frames: number;
  /** From the second broadcast's POST to its last accepted post, in ms (warm instances). */
  readonly lastPostMs: number;
  /** The same for the first broadcast, which starts every task instance (cold starts). */
  readonly coldLastPostMs: number;
  /** Invocations that delivered a frame: the broadcast consumer's and its tasks'. */
  readonly invocations: number;
  /** The most posts one invocation made, over every frame. */
  readonly maxPostsPerInvocation: number;
  /** The longest chain of invocations of a frame. */
  readonly depth: number;
  readonly everyFrameOnceInOrder: boolean;
  /** Posts the stand-in answered 429. */
  readonly throttledPosts: number;
  /** `deliver` Invokes the Lambda stand-in answered 429 (0 without `invokeConcurrency`). */
  readonly throttledInvokes: number;
  /** The most `deliver` invocations that ran at once behind the Lambda stand-in. */
  readonly maxConcurrentTasks: number;
  /** The functions' log lines of fan-out tasks run again or given up (a failure's why). */
  readonly taskFailures: readonly string[];
  /** Frames some subscriber never got. */
  readonly lostFrames: number;
  readonly duplicates: number;
  readonly outOfOrder: number;
  /** The stand-in's rate, for the table. */
  readonly ratePerSecond: number;
}

const SECRETS = {
  LAMBDACABLE_JWT_SECRET: 'scale-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'scale-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'scale-broadcast-key-0123456789abcdef0123456789',
};

/**
 * A real run through the functions on the emulators (`npm start`'s stack): `subscribers`
 * stand-in connections subscribed to one stream (stored as `$subscribe` stores them, their
 * endpoint the management API stand-in, which throttles above `ratePerSecond`), then
 * broadcasts over the HTTP API: httpBroadcast, the outbox, the relay, SQS FIFO, the broadcast
 * consumer and its `deliver` tasks. Every post is checked at the stand-in.
 */
export async function runLocalScale(options: LocalScaleOptions): Promise<LocalScaleResult> {
  const log = options.log ?? (() => {});
  const standIn = new ManagementStandIn({
    ratePerSecond: options.ratePerSecond,
    ...(options.burst === undefined ? {} : { burst: options.burst }),
  });
  const endpoint = await standIn.start();
  const lambda =
    options.invokeConcurrency === undefined
      ? undefined
      : new LambdaStandIn({
          functions: [`${LOCAL_PREFIX}-deliver`],
          concurrencyLimit: options.invokeConcurrency,
        });
  const lambdaEndpoint = await lambda?.start();
  const reports: FanoutTaskReport[] = [];
  const taskFailures: string[] = [];
  let pending = '';
  const stack = await startLocalStack({
    ...freeStackPorts(),
    env: SECRETS,
    output: 'quiet',
    watch: false,
    managementEndpoint: endpoint,
    ...(lambdaEndpoint ? { lambdaEndpoint } : {}),
    // The broadcast consumer logs each delivery by tasks with its report.
    onOutput: (text) => {
      const lines = (pending + text).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (/"fan-out task failed|"fan-out part given up/.test(line)) {
          taskFailures.push(line.slice(line.indexOf('{')).slice(0, 400));
        }
        if (!line.includes('"fan-out tasks"')) continue;
        try {
          reports.push(JSON.parse(line.slice(line.indexOf('{'))) as FanoutTaskReport);
        } catch {
          // Not a log line of ours.
        }
      }
    },
  });
  lambda?.forwardTo(`http://127.0.0.1:${stack.env.LAMBDACABLE_LAMBDA_PORT}`);
  const client = new DynamoDBClient({
    endpoint: stack.dynamodbEndpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    const stream = 'scale/live';
    const store = new DynamoConnectionStore({
      client,
      tableName: stack.resources.tables.connections,
    });
    const ids = Array.from({ length: options.subscribers }, (_, i) => `standin-${i}`);
    log(`subscribing ${ids.length} stand-in connections`);
    await forEachConcurrently(ids, 32, async (connectionId) => {
      await store.addSubscription({
        connectionId,
        stream,
        identifier: JSON.stringify({ channel: '$pubsub', stream_name: stream }),
        endpoint,
      });
    });
    const broadcast = async (n: number) => {
      const res = await fetch(`${stack.httpUrl}/_broadcast`, {
        method: 'POST',
        headers: { authorization: `Bearer ${SECRETS.LAMBDACABLE_BROADCAST_KEY}` },
        body: JSON.stringify({ stream, data: JSON.stringify({ n }) }),
      });
      if (res.status !== 201) throw new Error(`POST /_broadcast answered ${res.status}`);
    };
    const deadline = Date.now() + (options.timeoutMs ?? 180_000);
    const delivered = (frames: number) =>
      ids.every((id) => (standIn.received.get(id)?.length ?? 0) >= frames);
    const waitFor = async (frames: number) => {
      while (!delivered(frames) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    // The first frame starts the task instances (cold); the second, alone, is timed warm.
    log('broadcast 1 (cold instances)');
    let postedAt = performance.now();
    await broadcast(1);
    await waitFor(1);
    const coldLastPostMs = standIn.lastAcceptedAt - postedAt;
    log('broadcast 2 (warm, timed)');
    postedAt = performance.now();
    await broadcast(2);
    await waitFor(2);
    const lastPostMs = standIn.lastAcceptedAt - postedAt;
    log(`broadcasts 3..${options.frames} (back to back)`);
    for (let n = 3; n <= options.frames; n++) await broadcast(n);
    await waitFor(options.frames);
    // Late duplicates would show in a moment: wait for the stream to go quiet.
    await new Promise((r) => setTimeout(r, 1000));

    const expected = Array.from({ length: options.frames }, (_, i) => i + 1);
    const wrong = wrongDeliveries(standIn.received, ids, expected);
    let lostFrames = 0;
    for (const id of ids) {
      const got = new Set(standIn.received.get(id) ?? []);
      lostFrames += expected.filter((o) => !got.has(o)).length;
    }
    const first = reports[0];
    return {
      subscribers: options.subscribers,
      frames: options.frames,
      lastPostMs: Math.round(lastPostMs),
      coldLastPostMs: Math.round(coldLastPostMs),
      invocations: first?.invocations ?? 1,
      maxPostsPerInvocation: Math.max(0, ...reports.map((r) => r.maxPosts)),
      depth: Math.max(1, ...reports.map((r) => r.depth)),
      everyFrameOnceInOrder:
        wrong.missing === 0 && wrong.duplicated === 0 && wrong.outOfOrder === 0,
      throttledPosts: standIn.throttled,
      throttledInvokes: lambda?.throttled ?? 0,
      maxConcurrentTasks: lambda?.maxRunning ?? 0,
      taskFailures,
      lostFrames,
      duplicates: wrong.duplicated,
      outOfOrder: wrong.outOfOrder,
      ratePerSecond: options.ratePerSecond,
    };
  } finally {
    client.destroy();
    await stack.stop();
    await standIn.stop();
    await lambda?.stop();
  }
}
