import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type ConnectionApi,
  composeDelivery,
  defaultGatewayConfig,
  type Fanout,
} from '../lib/core';
import { spreadFor } from '../lib/realtime/fanout/spread';
import { bucketOf, DEFAULT_LAYOUT, planLayout } from '../lib/realtime/keepalive/partitions';
import {
  InProcessTaskRunner,
  MemoryBroker,
  MemoryConnectionStore,
  MemorySessionCache,
} from '../lib/testing';
import { memoryOf } from './function-memory';
import type { LocalScaleResult } from './scale-local';
import type { Figure } from './util';

/** API Gateway's account quota for `@connections` calls (per second, us-east-1; raisable). */
export const CONNECTIONS_QUOTA_PER_SECOND = 10_000;
/** Its burst: calls served at once before the rate applies. */
export const CONNECTIONS_QUOTA_BURST = 5_000;
/** Lambda gives a function one vCPU at this memory size, and a share in proportion below it. */
const FULL_VCPU_MB = 1_769;
/** AnyCable-Go (open source): one broadcast to 10,000 subscribers, p99 on 32 vCPU. */
export const ANYCABLE_10K_P99_MS = 880;
/**
 * Figures of AWS the bench cannot measure here; printed beside the results as the model's
 * assumptions: a warm synchronous `Invoke` round trip, and a DynamoDB `Query` page of 1 MB.
 */
const ASSUMED = { invokeMs: 25, queryPageMs: 10, subscriptionItemBytes: 250 };

/** One row of the fan-out model. */
export interface FanoutRow {
  readonly subscribers: number;
  readonly invocations: number;
  readonly maxPostsPerInvocation: number;
  readonly modelledLastDeliveryMs: number;
  readonly quotaFloorMs: number;
}

/** What the model is computed from, each figure measured in this run or named as an input. */
export interface FanoutModelInputs {
  /** CPU per `PostToConnection` on a full core, measured by the post-cpu section. */
  readonly cpuMicrosPerPost: number;
  readonly taskSize: number;
  readonly shardTarget: number;
  readonly deliverMemoryMb: number;
  readonly broadcastMemoryMb: number;
}

/** The model's inputs: serverless.yml's memory sizes and the settings' defaults. */
export function fanoutInputs(cpuMicrosPerPost: number): FanoutModelInputs {
  const defaults = defaultGatewayConfig();
  return {
    cpuMicrosPerPost,
    taskSize: defaults.fanoutTaskSize,
    shardTarget: defaults.streamShardTarget,
    deliverMemoryMb: memoryOf('deliver'),
    broadcastMemoryMb: memoryOf('broadcast'),
  };
}

/** The CPU of one post at a memory size, in ms: Lambda's CPU share is memory / 1,769 MB. */
function cpuMsPerPost(inputs: FanoutModelInputs, memoryMb: number): number {
  return inputs.cpuMicrosPerPost / 1000 / Math.min(1, memoryMb / FULL_VCPU_MB);
}

/** After the burst, the account's quota: the least time the last post of N can come. */
export function quotaFloorMs(subscribers: number): number {
  return (Math.max(0, subscribers - CONNECTIONS_QUOTA_BURST) / CONNECTIONS_QUOTA_PER_SECOND) * 1000;
}

/** A management API that accepts every post and counts each invocation's. */
class CountingApi implements ConnectionApi {
  readonly byInvocation = new Map<number, number>();
  constructor(private readonly invocation: AsyncLocalStorage<number>) {}
  async post(): Promise<'sent'> {
    const at = this.invocation.getStore() ?? 0;
    this.byInvocation.set(at, (this.byInvocation.get(at) ?? 0) + 1);
    return 'sent';
  }
  async close(): Promise<void> {}
}

/**
 * The fan-out at each size: the real {@link FanoutTree} over the memory adapters, each task
 * run as an invocation of its own, gives the invocations, the most posts of one and the depth
 * of the chain; the time is then modelled from the CPU per post measured in this run, the
 * functions' memory, Lambda's CPU share and the account quota:
 *
 *   last delivery = (depth − 1) × invoke + depth × read + max(most posts × CPU per post, quota floor)
 *
 * A stream that large has been spread (`spreadFor`) as its audience grew: the subscribers are
 * placed over its shards, as they are once the stream's first broadcasts widened it.
 */
export async function fanoutModel(
  inputs: FanoutModelInputs,
  sizes: readonly number[] = [1_000, 10_000, 100_000],
): Promise<FanoutRow[]> {
  const rows: FanoutRow[] = [];
  for (const subscribers of sizes) {
    const invocation = new AsyncLocalStorage<number>();
    const api = new CountingApi(invocation);
    const store = new MemoryConnectionStore();
    const sessions = new MemorySessionCache();
    let fanout: Fanout | undefined;
    let next = 0;
    const runner = new InProcessTaskRunner((task) =>
      invocation.run(++next, () => fanout!.runTask(task)),
    );
    const delivery = composeDelivery(
      {
        store,
        api,
        sessions,
        tasks: { runner, taskSize: inputs.taskSize, shardTarget: inputs.shardTarget },
      },
      (broadcaster) => new MemoryBroker({ broadcaster, sessions }),
    );
    fanout = delivery.fanout;
    const spread = spreadFor(subscribers, inputs.shardTarget);
    if (spread > 1) await store.spreadStream('live', spread);
    for (let i = 0; i < subscribers; i++) {
      await store.addSubscription({ connectionId: `c${i}`, stream: 'live', identifier: 'i' });
    }
    const report = await invocation.run(0, () =>
      fanout!.runTask({ message: { stream: 'live', data: '1', offset: 1, epoch: 'e' } }),
    );
    const maxPosts = Math.max(...api.byInvocation.values());
    const depth = report.depth;
    const memory = depth > 1 ? inputs.deliverMemoryMb : inputs.broadcastMemoryMb;
    const readItems = Math.min(subscribers, inputs.taskSize * 16 + 1);
    const pages = Math.max(1, Math.ceil((readItems * ASSUMED.subscriptionItemBytes) / 1_000_000));
    const posting = Math.max(maxPosts * cpuMsPerPost(inputs, memory), quotaFloorMs(subscribers));
    rows.push({
      subscribers,
      invocations: report.invocations,
      maxPostsPerInvocation: maxPosts,
      modelledLastDeliveryMs: Math.round(
        (depth - 1) * ASSUMED.invokeMs + depth * pages * ASSUMED.queryPageMs + posting,
      ),
      quotaFloorMs: Math.round(quotaFloorMs(subscribers)),
    });
  }
  return rows;
}

/** The human-readable table of the fan-out model, each figure beside its reference. */
export function fanoutFigures(inputs: FanoutModelInputs, rows: readonly FanoutRow[]): Figure[] {
  const figures: Figure[] = rows.map((r) => {
    const reference =
      r.subscribers === 10_000
        ? `${ANYCABLE_10K_P99_MS} ms AnyCable p99 (32 vCPU)`
        : `${r.quotaFloorMs} ms quota floor`;
    const against = r.subscribers === 10_000 ? ANYCABLE_10K_P99_MS : r.quotaFloorMs;
    return {
      name: `last delivery, ${r.subscribers.toLocaleString('en')} subscribers (modelled)`,
      value: `${r.modelledLastDeliveryMs} ms`,
      reference,
      ratio: against > 0 ? `${(r.modelledLastDeliveryMs / against).toFixed(2)}x` : '-',
      extra:
        `${r.invocations} invocations, at most ${r.maxPostsPerInvocation} posts each; quota floor ` +
        `${r.quotaFloorMs} ms (${(r.modelledLastDeliveryMs / Math.max(1, r.quotaFloorMs)).toFixed(2)}x)`,
    };
  });
  figures.push({
    name: 'model inputs',
    value: `${inputs.cpuMicrosPerPost.toFixed(0)} µs`,
    reference: 'CPU per post on a full core (measured in this run)',
    ratio: '-',
    extra:
      `deliver ${inputs.deliverMemoryMb} MB (${(Math.min(1, inputs.deliverMemoryMb / FULL_VCPU_MB)).toFixed(2)} vCPU), ` +
      `broadcast ${inputs.broadcastMemoryMb} MB; task ${inputs.taskSize} posts, shard ${inputs.shardTarget} subscribers; ` +
      `quota ${CONNECTIONS_QUOTA_PER_SECOND}/s after a ${CONNECTIONS_QUOTA_BURST} burst; assumed: Invoke ` +
      `${ASSUMED.invokeMs} ms warm, Query page ${ASSUMED.queryPageMs} ms`,
  });
  return figures;
}

/** The human-readable rows of the local run. */
export function localFigures(local: LocalScaleResult): Figure[] {
  return [
    {
      name: `local: last post, ${local.subscribers.toLocaleString('en')} subscribers`,
      value: `${local.lastPostMs} ms`,
      reference: `${Math.round((local.subscribers / local.ratePerSecond) * 1000)} ms at the stand-in's ${local.ratePerSecond}/s`,
      ratio: `${(local.lastPostMs / ((local.subscribers / local.ratePerSecond) * 1000)).toFixed(2)}x`,
      extra:
        `warm; the first frame (cold instances) ${local.coldLastPostMs} ms; ${local.invocations} ` +
        `invocations (depth ${local.depth}), at most ${local.maxPostsPerInvocation} posts each; 2 cores`,
    },
    {
      name: `local: ${local.frames} frames to every subscriber`,
      value: local.everyFrameOnceInOrder ? 'once, in order' : 'NOT once in order',
      reference: `${local.throttledPosts} posts throttled (429)`,
      ratio: `${local.lostFrames} lost`,
      extra: `${local.duplicates} duplicated, ${local.outOfOrder} out of order`,
    },
  ];
}

/** One row of the keepalive model. */
export interface KeepaliveRow {
  readonly connections: number;
  readonly pingInterval: number;
  readonly invocationsPerMinute: number;
  readonly maxPostsPerInvocation: number;
}

/**
 * The pinger's partitions at each size: K from the planner the coordinator runs
 * (`planLayout`, at the default `LAMBDACABLE_PINGER_PARTITION_RATE`), each partition a run
 * of a minute, and the connections each keeps counted from the real `partitionScope` over as
 * many connection ids (API Gateway-like, base64): the most pings one run posts in its minute
 * is its share × 60 / `pi`. With no broadcast sparing any ping: the worst case.
 */
export function keepaliveModel(
  sizes: readonly number[] = [10_000, 100_000, 1_000_000],
  intervals: readonly number[] = [3, 30],
): KeepaliveRow[] {
  const rate = defaultGatewayConfig().pingerPartitionRate;
  const rows: KeepaliveRow[] = [];
  for (const connections of sizes) {
    const ids = Array.from({ length: connections }, (_, i) =>
      Buffer.from(`conn-${i}-${(i * 2654435761) >>> 0}`).toString('base64'),
    );
    for (const pingInterval of intervals) {
      const layout = planLayout(DEFAULT_LAYOUT, connections / pingInterval, rate);
      const kept = new Array<number>(layout.partitions).fill(0);
      for (const id of ids) kept[bucketOf(id, layout.partitions)]!++;
      const most = Math.max(...kept);
      rows.push({
        connections,
        pingInterval,
        invocationsPerMinute: layout.partitions,
        maxPostsPerInvocation: Math.ceil((most * 60) / pingInterval),
      });
    }
  }
  return rows;
}

/** The human-readable table of the keepalive model. */
export function keepaliveFigures(
  rows: readonly KeepaliveRow[],
  inputs: FanoutModelInputs,
): Figure[] {
  const rate = defaultGatewayConfig().pingerPartitionRate;
  const pingerMb = memoryOf('pinger');
  const cpuMs = cpuMsPerPost(inputs, pingerMb);
  return rows.map((r) => {
    const pingsPerSecond = r.connections / r.pingInterval;
    const perRun = r.maxPostsPerInvocation / 60;
    return {
      name: `keepalive, ${r.connections.toLocaleString('en')} connections, pi=${r.pingInterval}`,
      value: `${r.invocationsPerMinute} runs/min`,
      reference: `${rate} pings/s per run`,
      ratio: `${(perRun / rate).toFixed(2)}x`,
      extra:
        `at most ${r.maxPostsPerInvocation.toLocaleString('en')} pings per run-minute (${perRun.toFixed(0)}/s, ` +
        `${((perRun * cpuMs) / 10).toFixed(0)}% of a ${pingerMb} MB run's CPU); ` +
        `${Math.round(pingsPerSecond).toLocaleString('en')} pings/s in all = ` +
        `${(pingsPerSecond / CONNECTIONS_QUOTA_PER_SECOND).toFixed(2)}x the default @connections quota`,
    };
  });
}
