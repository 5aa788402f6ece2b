import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../infra/local/services';
import { DynamoConnectionStore } from '../lib/aws';
import { createConnectToken, signStreamName } from '../lib/core';
import { meterCapacity } from './capacity';
import { type Run, type Tally, tally, usagePerEvent } from './delivery-tally';
import { memoryOf } from './function-memory';
import { costOf, type Usage } from './prices';
import { type BenchSecrets, type BenchStack, broadcastOverHttp, sleep } from './stack';
import type { Figure } from './util';
import { BenchClient, failures, inWaves, signedIdentifier } from './ws-clients';

/** Connected, subscribed clients. */
const SUBSCRIBERS = 100;
/** Broadcasts per run. */
const EVENTS = 50;
/** The goal: AWS requests per event beyond the per-subscriber posts. */
const REQUEST_GOAL = 0.3;
/** The floor: API Gateway's own price per million messages posted, in dollars. */
const FLOOR_PER_MILLION = 1.0;
/** The goal: within this factor of the floor. */
const COST_GOAL = 1.2;
/** After the last delivery, the pollers still delete the batch: their calls belong to the run. */
const SETTLE_MS = 1_500;
const DELIVERY_TIMEOUT_MS = 60_000;

const fixed = (n: number, digits = 2) => n.toFixed(digits);
/** Requests of a tally's path whose key matches. */
const ofKeys = (t: Tally, pattern: RegExp) =>
  [...t.path].filter(([key]) => pattern.test(key)).reduce((n, [, v]) => n + v, 0);
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/**
 * AWS requests per delivered event on the whole path, and their list price: `SUBSCRIBERS`
 * raw `ws` clients subscribed to one stream, then `EVENTS` broadcasts over
 * `POST /_broadcast`, one by one (each waits for every client to have the one before) and
 * as a burst (all at once). Every SDK call of the functions and of the pollers is recorded
 * with middleware (`LAMBDACABLE_AWS_CALL_LOG`); only the calls made after the subscribes (and
 * a warm-up broadcast) count.
 */
export async function benchDeliveryCost(
  bench: BenchStack,
  secrets: BenchSecrets,
): Promise<{ requests: Figure[]; cost: Figure[] }> {
  const { stack } = bench;
  const stream = 'bench/path';
  const identifier = signedIdentifier(signStreamName(stream, secrets.LAMBDACABLE_STREAMS_SECRET));
  const tokens = await Promise.all(
    Array.from({ length: SUBSCRIBERS }, (_, i) =>
      createConnectToken({ sub: `path-${i}`, ttlSeconds: 600 }, secrets.LAMBDACABLE_JWT_SECRET),
    ),
  );
  const clients: BenchClient[] = [];
  const received = new Map<string, number>();
  let duplicates = 0;
  try {
    const outcomes = await inWaves(tokens, 50, async (token) => {
      const c = await BenchClient.connect(stack.wsUrl, token, 30_000);
      clients.push(c);
      await c.subscribe(identifier, 30_000);
      const seen = new Set<string>();
      c.onBroadcast = (b) => {
        const { run, i } = b.message as { run: string; i: number };
        const key = `${run}:${i}`;
        if (seen.has(key)) duplicates++;
        else received.set(run, (received.get(run) ?? 0) + 1);
        seen.add(key);
      };
      return c;
    });
    const failed = failures(outcomes);
    if (failed) throw new Error(`delivery cost bench: clients failed: ${failed}`);

    const delivered = async (run: string, events: number) => {
      const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
      while ((received.get(run) ?? 0) < events * SUBSCRIBERS) {
        if (Date.now() > deadline) {
          throw new Error(
            `delivery cost bench: ${run}: ${received.get(run) ?? 0}/${events * SUBSCRIBERS} frames`,
          );
        }
        await sleep(5);
      }
    };
    const post = async (run: string, i: number, postMs: number[]) => {
      const t0 = performance.now();
      await broadcastOverHttp(stack, secrets, [{ stream, data: JSON.stringify({ run, i }) }]);
      postMs.push(performance.now() - t0);
    };
    const measured = async (
      label: string,
      send: (postMs: number[]) => Promise<void>,
    ): Promise<Run> => {
      const from = [bench.callLog.mark(), bench.pollerLog.mark(), bench.invocations.length];
      const dupsBefore = duplicates;
      const postMs: number[] = [];
      await send(postMs);
      await delivered(label, EVENTS);
      await sleep(SETTLE_MS);
      return {
        label,
        events: EVENTS,
        calls: bench.callLog.between(from[0]!, bench.callLog.mark()),
        pollerCalls: bench.pollerLog.between(from[1]!, bench.pollerLog.mark()),
        invocations: bench.invocations.slice(from[2]!),
        postMs,
        duplicates: duplicates - dupsBefore,
      };
    };

    // Warm-up: cold starts and the schema cache are not what a steady path costs.
    await post('warm-up', 0, []);
    await delivered('warm-up', 1);
    await sleep(SETTLE_MS);
    const oneByOne = await measured('one by one', async (postMs) => {
      for (let i = 0; i < EVENTS; i++) {
        await post('one by one', i, postMs);
        await delivered('one by one', i + 1);
      }
    });
    const burst = await measured('burst', async (postMs) => {
      await Promise.all(Array.from({ length: EVENTS }, (_, i) => post('burst', i, postMs)));
    });

    // The fan-out Query's units, measured on the same table with ReturnConsumedCapacity.
    const dynamodb = new DynamoDBClient({
      endpoint: stack.dynamodbEndpoint,
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
    });
    const meter = meterCapacity(dynamodb);
    const store = new DynamoConnectionStore({
      client: dynamodb,
      tableName: stack.resources.tables.connections,
    });
    let subscribers = 0;
    for await (const page of store.subscribersOf(stream)) subscribers += page.length;
    const queryPages = meter.calls;
    dynamodb.destroy();

    return report([oneByOne, burst], { subscribers, queryPages, queryUnits: meter.units });
  } finally {
    for (const c of clients) c.close();
  }
}

function report(
  runs: readonly Run[],
  query: { subscribers: number; queryPages: number; queryUnits: number },
): { requests: Figure[]; cost: Figure[] } {
  const tallies = runs.map(tally);
  const [a, b] = [runs[0]!, runs[1]!];
  const [ta, tb] = [tallies[0]!, tallies[1]!];
  const requests: Figure[] = [];
  for (const [run, t] of [
    [a, ta],
    [b, tb],
  ] as const) {
    const perEvent = sum(t.path) / run.events;
    const invocations = sum(t.invocations) / run.events;
    requests.push({
      name: `Requests per broadcast beyond the posts, ${run.label}`,
      value: fixed(perEvent),
      reference: `${REQUEST_GOAL} goal`,
      ratio: `${fixed(perEvent / REQUEST_GOAL, 1)}x`,
      extra:
        `functions' SDK calls ${fixed(t.pathCalls.length / run.events)} + event source ` +
        `mappings' SQS calls ${fixed(ofKeys(t, / mapping /) / run.events)} + Lambda invocations ` +
        `${fixed(invocations)} (${[...t.invocations].map(([fn, n]) => `${fn} ${fixed(n / run.events)}`).join(', ')})` +
        ` + HTTP API requests ${fixed(ofKeys(t, /^API Gateway HTTP/) / run.events)}` +
        `${run.duplicates ? `; ${run.duplicates} duplicate frames` : ''}`,
    });
    const perFrame = sum(t.path) / Math.max(1, t.posts);
    requests.push({
      name: `Requests per delivered frame beyond the posts, ${run.label}`,
      value: fixed(perFrame, 3),
      reference: `${REQUEST_GOAL} goal`,
      ratio: `${fixed(perFrame / REQUEST_GOAL)}x`,
      extra: `the same requests over ${fixed(t.posts / run.events)} frames per broadcast`,
    });
  }
  requests.push({
    name: 'PostToConnection per event (the per-subscriber posts)',
    value: `${fixed(ta.posts / a.events)} / ${fixed(tb.posts / b.events)}`,
    reference: `${SUBSCRIBERS} subscribers`,
    ratio: `${fixed(ta.posts / a.events / SUBSCRIBERS)}x / ${fixed(tb.posts / b.events / SUBSCRIBERS)}x`,
    extra: 'one by one / burst',
  });
  const keys = [...new Set([...ta.path.keys(), ...tb.path.keys()])].sort(
    (x, y) => (tb.path.get(y) ?? 0) - (tb.path.get(x) ?? 0),
  );
  for (const key of keys) {
    const pa = (ta.path.get(key) ?? 0) / a.events;
    const pb = (tb.path.get(key) ?? 0) / b.events;
    requests.push({
      name: `  ${key}`,
      value: `${fixed(pa)} / ${fixed(pb)}`,
      reference: `${REQUEST_GOAL} goal`,
      ratio: `${fixed(pa / REQUEST_GOAL, 1)}x / ${fixed(pb / REQUEST_GOAL, 1)}x`,
    });
  }
  const asides = [...new Set([...ta.aside.keys(), ...tb.aside.keys(), ...ta.idle.keys()])];
  for (const key of asides) {
    const n = (m: Tally) => m.aside.get(key) ?? m.idle.get(key) ?? 0;
    requests.push({
      name: `  not per event: ${key}`,
      value: `${n(ta)} / ${n(tb)}`,
      reference: 'calls in the run',
      ratio: '-',
    });
  }

  const cost: Figure[] = [];
  const queryUnitsPerPage = query.queryUnits / Math.max(1, query.queryPages);
  for (const [run, t] of [
    [a, ta],
    [b, tb],
  ] as const) {
    const usage = usagePerEvent(run, t, queryUnitsPerPage);
    const deliveries = t.posts / run.events;
    const { total, by } = costOf(usage);
    const perMillion = (total / deliveries) * 1e6;
    const share = (fields: (keyof Usage)[]) =>
      `$${fixed((fields.reduce((n, f) => n + by[f], 0) / deliveries) * 1e6, 3)}`;
    cost.push({
      name: `$ per million deliveries, 1 broadcast → ${SUBSCRIBERS}, ${run.label}`,
      value: `$${fixed(perMillion, 3)}`,
      reference: `$${fixed(FLOOR_PER_MILLION)} API Gateway floor`,
      ratio: `${fixed(perMillion / FLOOR_PER_MILLION)}x (goal ≤ ${COST_GOAL}x)`,
      extra:
        `API GW messages ${share(['apiGatewayMessages'])}, HTTP API ${share(['httpApiRequests'])}, ` +
        `Lambda requests ${share(['lambdaRequests'])}, Lambda GB-s ${share(['lambdaGbSeconds'])}, ` +
        `DynamoDB ${share(['dynamodbWriteUnits', 'dynamodbReadUnits'])} ` +
        `(${fixed(usage.dynamodbWriteUnits ?? 0, 1)} WRU + ${fixed(usage.dynamodbReadUnits ?? 0, 1)} RRU/event), ` +
        `SQS ${share(['sqsFifoRequests'])}`,
    });
  }
  const durations = [...ta.durationMs]
    .map(([fn, ms]) => `${fn} ${Math.round(ms / (ta.invocations.get(fn) || 1))} ms`)
    .join(', ');
  cost.push({
    name: 'Lambda duration per invocation (local, one by one)',
    value: durations,
    reference: `${memoryOf('broadcast')} MB (serverless.yml)`,
    ratio: '-',
    extra:
      'round trips measured by the pollers and the POSTs under npm start: an upper bound of ' +
      "AWS's billed duration; connection-minutes ($0.25/M) are per connection, not per delivery",
  });
  cost.push({
    name: `Fan-out Query, ${query.subscribers} subscribers`,
    value: `${fixed(query.queryUnits, 1)} RRU`,
    reference: `${query.queryPages} pages`,
    ratio: '-',
    extra: 'ReturnConsumedCapacity from DynamoDB Local, used for each byStreamShard Query above',
  });
  return { requests, cost };
}
