import type { PollerInvocation } from '../infra/local/pollers/sqs';
import type { RecordedCall } from '../lib/adapters/aws/call-log';
import { memoryOf } from './function-memory';
import { gbSeconds, type Usage } from './prices';

/**
 * The accounting of the delivery-cost bench: a run's recorded calls and invocations sorted
 * into the path's billed requests (per event) and the rest, and their list-price usage.
 */

/** `lambdacable-local-broadcast` → `broadcast`. */
const shortName = (fn: string) => fn.replace(/^lambdacable-local-/, '');
/** `DynamoDBClient` → `DynamoDB`. */
const service = (client: string) => client.replace(/Client$/, '');

/** What one run (a series of broadcasts) made. */
export interface Run {
  readonly label: string;
  readonly events: number;
  readonly calls: RecordedCall[];
  readonly pollerCalls: RecordedCall[];
  readonly invocations: PollerInvocation[];
  /** Round trips of the POSTs: an upper bound of httpBroadcast's duration. */
  readonly postMs: number[];
  readonly duplicates: number;
}

/** A run's requests per event, by caller and operation, and what they are. */
export interface Tally {
  /** Billed requests on the path, but the per-subscriber posts. */
  readonly path: Map<string, number>;
  /** The functions' SDK calls among them. */
  readonly pathCalls: RecordedCall[];
  readonly posts: number;
  /** Requests of the pinger, and of connection functions (none expected). */
  readonly aside: Map<string, number>;
  /** Stream reads of the relay's event source mapping (free) and empty SQS receives (idle). */
  readonly idle: Map<string, number>;
  readonly invocations: Map<string, number>;
  readonly durationMs: Map<string, number>;
}

export function tally(run: Run): Tally {
  const path = new Map<string, number>();
  const aside = new Map<string, number>();
  const idle = new Map<string, number>();
  const add = (m: Map<string, number>, key: string, n = 1) => m.set(key, (m.get(key) ?? 0) + n);
  let posts = 0;
  const pathCalls: RecordedCall[] = [];
  for (const c of run.calls) {
    const fn = shortName(c.function);
    const key = `${fn} ${service(c.client)}.${c.operation}`;
    if (fn === 'broadcast' && c.operation === 'PostToConnection') posts++;
    else if (fn === 'pinger' || fn.startsWith('ws')) add(aside, key);
    else {
      add(path, key);
      pathCalls.push(c);
    }
  }
  const invocations = new Map<string, number>();
  const durationMs = new Map<string, number>();
  invocations.set('httpBroadcast', run.postMs.length);
  durationMs.set(
    'httpBroadcast',
    run.postMs.reduce((a, b) => a + b, 0),
  );
  for (const i of run.invocations) {
    const fn = shortName(i.functionName);
    add(invocations, fn);
    add(durationMs, fn, i.ms);
  }
  for (const c of run.pollerCalls) {
    const fn = shortName(c.function.replace(/ event source mapping$/, ''));
    const key = `${fn} mapping ${service(c.client)}.${c.operation}`;
    if (c.client === 'DynamoDBStreamsClient') add(idle, `${key} (free to Lambda)`);
    else if (c.operation !== 'ReceiveMessage') add(path, key);
  }
  // One receive per invocation brought its batch; the others came back empty (idle polling).
  const receives = new Map<string, number>();
  for (const c of run.pollerCalls) {
    if (c.operation === 'ReceiveMessage') {
      add(receives, shortName(c.function.replace(/ event source mapping$/, '')));
    }
  }
  for (const [fn, n] of receives) {
    const batches = Math.min(n, invocations.get(fn) ?? 0);
    if (batches > 0) add(path, `${fn} mapping SQS.ReceiveMessage`, batches);
    if (n > batches) add(idle, `${fn} mapping SQS.ReceiveMessage (empty)`, n - batches);
  }
  for (const [fn, n] of invocations) add(path, `${fn} Lambda invocation`, n);
  add(path, 'API Gateway HTTP API request (POST /_broadcast)', run.postMs.length);
  return { path, pathCalls, posts, aside, idle, invocations, durationMs };
}

/**
 * DynamoDB units of the recorded calls, by AWS's on-demand rules: every item here is under
 * 1 KB (writes) and 4 KB (reads); a transactional item costs twice; a `GetItem` is counted as
 * consistent (the log does not say; the path's reads are); a `Query` of the stream index as
 * measured on the same table (`queryUnits` per page).
 */
function dynamodbUnits(
  calls: readonly RecordedCall[],
  queryUnits: number,
): {
  wru: number;
  rru: number;
} {
  let wru = 0;
  let rru = 0;
  for (const c of calls) {
    if (c.client !== 'DynamoDBClient') continue;
    const items = Array.isArray(c.input.TransactItems) ? c.input.TransactItems.length : 1;
    switch (c.operation) {
      case 'GetItem':
        rru += 1;
        break;
      case 'Query':
        rru += c.input.IndexName === 'byStreamShard' ? queryUnits : 0.5;
        break;
      case 'TransactWriteItems':
        wru += 2 * items;
        break;
      case 'TransactGetItems':
        rru += 2 * items;
        break;
      // One item per BatchWriteItem here: the producer writes one item per partition per
      // request, and every event of a run has the same partition (the stream).
      default:
        wru += 1;
    }
  }
  return { wru, rru };
}

/** A run's list price per event (one broadcast to its subscribers). */
export function usagePerEvent(run: Run, t: Tally, queryUnits: number): Usage {
  const perEvent = (n: number) => n / run.events;
  const sqs = [...t.path].filter(([key]) => / SQS\./.test(key)).reduce((n, [, v]) => n + v, 0);
  let gbs = 0;
  for (const [fn, ms] of t.durationMs) gbs += gbSeconds(ms, memoryOf(fn));
  const units = dynamodbUnits(t.pathCalls, queryUnits);
  return {
    apiGatewayMessages: perEvent(t.posts),
    httpApiRequests: perEvent(run.postMs.length),
    lambdaRequests: perEvent([...t.invocations.values()].reduce((a, b) => a + b, 0)),
    lambdaGbSeconds: perEvent(gbs),
    dynamodbWriteUnits: perEvent(units.wru),
    dynamodbReadUnits: perEvent(units.rru),
    sqsFifoRequests: perEvent(sqs),
  };
}
