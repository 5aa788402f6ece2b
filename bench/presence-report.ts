/**
 * The figures of the presence cost bench (bench/presence-cost.ts): its runs' recorded calls
 * and invocations as AWS requests per operation, and their list price.
 */
import type { PollerInvocation } from '../infra/local/pollers/sqs';
import type { RecordedCall } from '../lib/adapters/aws/call-log';
import { MIN_BUCKETS } from '../lib/realtime/keepalive/partitions';
import { PRESENCE_EXPIRY_EVERY_MS } from '../lib/realtime/keepalive/pinger';
import { memoryOf } from './function-memory';
import { costOf, gbSeconds, PRICES, type Usage } from './prices';
import type { OfflineInvocation } from './stack';
import type { Figure } from './util';

/** The pinger's tick (`LAMBDACABLE_PINGER_TICK_MS`, default), in ms. */
const TICK_MS = 250;
/** The pinger's `byBucket` Queries of connection changes: one per bucket per tick. */
const TICK_QUERIES_PER_SECOND = MIN_BUCKETS * (1000 / TICK_MS);
/** Its Queries of presence departures: one per bucket per expiry. */
const EXPIRY_QUERIES_PER_SECOND = MIN_BUCKETS * (1000 / PRESENCE_EXPIRY_EVERY_MS);
/** The delivery-cost goal: AWS requests beyond the posts per delivered frame. */
const FRAME_GOAL = 0.3;
/**
 * Functions only serverless-offline reports: API Gateway's routes and the fan-out tasks (the
 * pollers report the relay's and the consumers' invocations; the pinger runs all the time).
 */
const OFFLINE_ONLY = /^(ws\w+|httpBroadcast|deliver)$/;

/** What one run (a series of one presence operation) made. */
export interface Run {
  readonly label: string;
  readonly ops: number;
  /** Client frames sent (each one API Gateway message in and one `wsDefault` invocation). */
  readonly frames: number;
  /** Open subscribers of the stream when the run ended. */
  readonly subscribers: number;
  /** The `join` and `leave` messages the clients got in the run. */
  readonly received: number;
  readonly seconds: number;
  readonly calls: RecordedCall[];
  readonly pollerCalls: RecordedCall[];
  readonly invocations: PollerInvocation[];
  readonly offline: OfflineInvocation[];
}

/** `lambdacable-local-broadcast` → `broadcast`. */
const shortName = (fn: string) => fn.replace(/^lambdacable-local-/, '');

/** A call's row: caller, service, operation and table or index, or a transaction's items. */
function keyOf(c: RecordedCall): string {
  const service = c.client.replace(/Client$/, '');
  const items = c.input.TransactItems as Record<string, string>[] | undefined;
  const on = items
    ? ` (${items.map((i) => Object.entries(i).map(([kind, table]) => `${kind} ${shortName(table)}`)).join(' + ')})`
    : typeof c.input.IndexName === 'string'
      ? ` ${c.input.IndexName}`
      : typeof c.input.TableName === 'string'
        ? ` ${shortName(c.input.TableName)}`
        : '';
  return `${shortName(c.function)} ${service}.${c.operation}${on}`;
}

/** A run's requests: on the operation's path beyond the posts, the posts, and apart. */
interface Tally {
  readonly path: Map<string, number>;
  readonly pathCalls: RecordedCall[];
  /** Posts of the operation: the fan-out's and the replies. */
  readonly posts: number;
  /** The pinger's tick Queries of `byBucket` (connection changes, presence departures). */
  readonly ticks: number;
  /** The pinger's pings and welcomes: a connection's, not an operation's. */
  readonly pings: number;
  readonly sdkCalls: number;
  readonly invocations: Map<string, number>;
  /** Local round trips: an upper bound of the billed duration. */
  readonly gbs: number;
  readonly wsDefaultMs: number[];
}

function tally(run: Run): Tally {
  const path = new Map<string, number>();
  const add = (key: string, n = 1) => path.set(key, (path.get(key) ?? 0) + n);
  const pathCalls: RecordedCall[] = [];
  let [posts, ticks, pings] = [0, 0, 0];
  for (const c of run.calls) {
    const pinger = shortName(c.function) === 'pinger';
    if (c.operation === 'PostToConnection') pinger ? pings++ : posts++;
    else if (pinger && c.operation === 'Query' && c.input.IndexName === 'byBucket') ticks++;
    else {
      add(keyOf(c));
      pathCalls.push(c);
    }
  }
  const invocations = new Map<string, number>();
  let gbs = 0;
  const invoked = (fn: string, ms: number) => {
    invocations.set(fn, (invocations.get(fn) ?? 0) + 1);
    gbs += gbSeconds(ms, memoryOf(fn));
  };
  for (const i of run.invocations) invoked(shortName(i.functionName), i.ms);
  const offline = run.offline.filter((i) => OFFLINE_ONLY.test(i.functionName));
  for (const i of offline) invoked(i.functionName, i.ms);
  // One receive per invocation brought its batch; the others came back empty (idle polling).
  const receives = new Map<string, number>();
  let sdkCalls = pathCalls.length;
  for (const c of run.pollerCalls) {
    const fn = shortName(c.function.replace(/ event source mapping$/, ''));
    if (c.client === 'DynamoDBStreamsClient') continue; // free to Lambda
    if (c.operation === 'ReceiveMessage') receives.set(fn, (receives.get(fn) ?? 0) + 1);
    else {
      add(`${fn} mapping SQS.${c.operation}`);
      sdkCalls++;
    }
  }
  for (const [fn, n] of receives) {
    const batches = Math.min(n, invocations.get(fn) ?? 0);
    if (batches > 0) add(`${fn} mapping SQS.ReceiveMessage`, batches);
    sdkCalls += batches;
  }
  for (const [fn, n] of invocations) add(`${fn} Lambda invocation`, n);
  if (run.frames > 0) add('API Gateway message in (the client frame)', run.frames);
  const wsDefaultMs = offline.filter((i) => i.functionName === 'wsDefault').map((i) => i.ms);
  return { path, pathCalls, posts, ticks, pings, sdkCalls, invocations, gbs, wsDefaultMs };
}

/**
 * DynamoDB units by AWS's on-demand rules, every item here under 1 KB: each item of a
 * transaction (a `ConditionCheck` too: an upper bound) 2 WRU, any other write 1; a `GetItem`
 * (or the pinger's `BatchGetItem` of one connection) and a Query of the table strongly
 * consistent (1 RRU, as the presence store's and the connection reads are), a Query of an
 * index eventually (0.5 RRU).
 */
function dynamodbUnits(calls: readonly RecordedCall[]): { wru: number; rru: number } {
  let [wru, rru] = [0, 0];
  for (const c of calls) {
    if (c.client !== 'DynamoDBClient') continue;
    if (c.operation === 'TransactWriteItems') {
      wru += 2 * (c.input.TransactItems as unknown[]).length;
    } else if (c.operation === 'GetItem' || c.operation === 'BatchGetItem') rru += 1;
    else if (c.operation === 'Query') rru += c.input.IndexName ? 0.5 : 1;
    else wru += 1;
  }
  return { wru, rru };
}

/** A run's usage per operation. */
function usageOf(run: Run, t: Tally): Usage {
  const per = (n: number) => n / run.ops;
  const units = dynamodbUnits(t.pathCalls);
  const sqs = [...t.path].filter(([key]) => / SQS\./.test(key)).reduce((n, [, v]) => n + v, 0);
  return {
    apiGatewayMessages: per(run.frames + t.posts),
    lambdaRequests: per(sum(t.invocations)),
    lambdaGbSeconds: per(t.gbs),
    dynamodbWriteUnits: per(units.wru),
    dynamodbReadUnits: per(units.rru),
    sqsFifoRequests: per(sqs),
  };
}

const fixed = (n: number, digits = 2) => n.toFixed(digits);
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/**
 * The figures: per run its requests beyond the posts (against the same operation without an
 * event, where there is one), each request kind, and per delivered frame; then the list price.
 * `against` names, per run label, the run it is compared with.
 */
export function presenceReport(
  runs: readonly Run[],
  against: Readonly<Record<string, string>>,
  infoTotal: number,
): { requests: Figure[]; cost: Figure[] } {
  const tallies = new Map(runs.map((r) => [r.label, tally(r)]));
  const beyond = (r: Run) => sum(tallies.get(r.label)!.path) / r.ops;
  const requests: Figure[] = [];
  const cost: Figure[] = [];
  for (const run of runs) {
    const t = tallies.get(run.label)!;
    const per = (n: number) => fixed(n / run.ops);
    const other = runs.find((r) => r.label === against[run.label]);
    requests.push({
      name: `Requests per ${run.label}, beyond the posts`,
      value: fixed(beyond(run)),
      reference: other ? `${fixed(beyond(other))} ${other.label}` : '-',
      ratio: other ? `${fixed(beyond(run) / beyond(other))}x` : '-',
      extra:
        `SDK calls ${per(t.sdkCalls)} + Lambda invocations ${per(sum(t.invocations))} ` +
        `(${[...t.invocations].map(([fn, n]) => `${fn} ${per(n)}`).join(', ')})` +
        `${run.frames ? ` + API Gateway messages in ${per(run.frames)}` : ''}; ` +
        `posts ${per(t.posts)}${t.posts ? ` to ${run.subscribers} subscribers` : ''}, ` +
        `join/leave messages received ${per(run.received)}`,
    });
    if (other) {
      requests.push({
        name: `  the event's part (${run.label} − ${other.label})`,
        value: fixed(beyond(run) - beyond(other)),
        reference: 'difference of the two runs',
        ratio: '-',
      });
    }
    for (const [key, n] of [...t.path].sort(([a], [b]) => a.localeCompare(b))) {
      requests.push({ name: `  ${key}`, value: per(n), reference: 'per operation', ratio: '-' });
    }
    if (t.posts >= run.ops * 2) {
      const perFrame = sum(t.path) / t.posts;
      requests.push({
        name: `  per delivered presence frame, beyond the posts`,
        value: fixed(perFrame, 3),
        reference: `${FRAME_GOAL} goal (delivery-cost)`,
        ratio: `${fixed(perFrame / FRAME_GOAL)}x`,
        extra: `${per(t.posts)} frames per operation`,
      });
    }
  }
  const all = [...tallies.values()];
  const seconds = runs.reduce((n, r) => n + r.seconds, 0);
  const ticksPerSecond = all.reduce((n, t) => n + t.ticks, 0) / seconds;
  requests.push({
    name: '  not per operation: pinger Query byBucket (its ticks)',
    value: `${fixed(ticksPerSecond, 1)}/s`,
    reference: `${TICK_QUERIES_PER_SECOND}/s: ${MIN_BUCKETS} buckets per ${TICK_MS} ms tick`,
    ratio: `${fixed(ticksPerSecond / TICK_QUERIES_PER_SECOND)}x`,
    extra:
      `expected ${TICK_QUERIES_PER_SECOND + EXPIRY_QUERIES_PER_SECOND}/s: an expiry every ` +
      `${PRESENCE_EXPIRY_EVERY_MS} ms also Queries the ${MIN_BUCKETS} departure buckets, ` +
      `with or without presence; pinger posts (pings) ${all.reduce((n, t) => n + t.pings, 0)} ` +
      `in ${fixed(seconds, 0)} s`,
  });
  requests.push({
    name: '  the info reply',
    value: `total ${infoTotal}`,
    reference: 'members present',
    ratio: '-',
    extra: 'the members the presence reads found (the ids joined, and the warm-up one)',
  });

  const prices = new Map(runs.map((r) => [r.label, costOf(usageOf(r, tallies.get(r.label)!))]));
  for (const run of runs) {
    const usage = usageOf(run, tallies.get(run.label)!);
    const { total, by } = prices.get(run.label)!;
    const other = prices.get(against[run.label] ?? '');
    const messages = by.apiGatewayMessages;
    const share = (fields: (keyof Usage)[]) =>
      `$${fixed(fields.reduce((n, f) => n + by[f], 0) * 1e6, 3)}`;
    cost.push({
      name: `$ per million: ${run.label}`,
      value: `$${fixed(total * 1e6, 3)}`,
      reference: `$${fixed(messages * 1e6)} API Gateway messages`,
      ratio: messages > 0 ? `${fixed(total / messages)}x` : '-',
      extra:
        `beyond the messages $${fixed((total - messages) * 1e6, 3)}: Lambda requests ` +
        `${share(['lambdaRequests'])}, Lambda GB-s ${share(['lambdaGbSeconds'])}, DynamoDB ` +
        `${share(['dynamodbWriteUnits', 'dynamodbReadUnits'])} (${fixed(usage.dynamodbWriteUnits ?? 0, 1)} WRU + ` +
        `${fixed(usage.dynamodbReadUnits ?? 0, 1)} RRU), SQS ${share(['sqsFifoRequests'])}` +
        `${other ? `; the event's part $${fixed((total - other.total) * 1e6, 3)} (− ${against[run.label]})` : ''}`,
    });
  }
  const wsDefaultMs = all.flatMap((t) => t.wsDefaultMs);
  cost.push({
    name: 'wsDefault duration per invocation (local)',
    value: `${Math.round(wsDefaultMs.reduce((a, b) => a + b, 0) / Math.max(1, wsDefaultMs.length))} ms`,
    reference: `${memoryOf('wsDefault')} MB (serverless.yml)`,
    ratio: '-',
    extra: "serverless-offline's Duration under npm start: an upper bound of the billed one",
  });
  // Modelled, not measured: what the departure Queries of every tick cost a pinger partition.
  const queriesPerHour = EXPIRY_QUERIES_PER_SECOND * 3600;
  const perHour = queriesPerHour * 0.5 * PRICES.dynamodbReadUnit;
  cost.push({
    name: "Presence expiry, the pinger's departure Queries (modelled)",
    value: `$${fixed(perHour, 4)}/h`,
    reference: `$${fixed(perHour * 730)} a month per partition`,
    ratio: '-',
    extra:
      `inputs: ${MIN_BUCKETS} buckets × ${1000 / PRESENCE_EXPIRY_EVERY_MS} expiries/s = ${queriesPerHour.toLocaleString('en-US')} ` +
      `Queries/h, 0.5 RRU each (empty, eventually consistent), $${fixed(PRICES.dynamodbReadUnit * 1e6, 3)}/M RRU`,
  });
  return { requests, cost };
}
