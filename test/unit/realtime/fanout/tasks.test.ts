import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import {
  type ConnectionApi,
  type Fanout,
  type FanoutTask,
  type FanoutTaskReport,
  ThrottledError,
} from '../../../../lib/core';
import { InProcessTaskRunner, MemoryConnectionStore } from '../../../../lib/testing';
import { gatewayHarness } from '../../../helpers/gateway';

/** Which invocation a post belongs to: the root (0) or a fan-out task's. */
const invocation = new AsyncLocalStorage<number>();

/**
 * A management API that keeps, per connection, the offsets it was delivered (not the frames:
 * 100,000 connections), counts each invocation's posts, and throttles the posts `throttled`
 * picks (nothing is delivered then).
 */
class AudienceApi implements ConnectionApi {
  readonly offsets = new Map<string, number[]>();
  readonly postsByInvocation = new Map<number, number>();
  throttles = 0;
  constructor(private readonly throttled: () => boolean = () => false) {}

  async post(connectionId: string, frame: string): Promise<'sent' | 'gone'> {
    const at = invocation.getStore() ?? -1;
    this.postsByInvocation.set(at, (this.postsByInvocation.get(at) ?? 0) + 1);
    if (this.throttled()) {
      this.throttles++;
      throw new ThrottledError(`PostToConnection failed for ${connectionId}: HTTP 429`, {
        resource: 'execute-api',
        ids: [connectionId],
      });
    }
    const { offset } = JSON.parse(frame) as { offset: number };
    const list = this.offsets.get(connectionId) ?? [];
    list.push(offset);
    this.offsets.set(connectionId, list);
    return 'sent';
  }

  async close(): Promise<void> {}

  /** The most posts one invocation made (first posts and later passes). */
  maxPostsPerInvocation(): number {
    return Math.max(...this.postsByInvocation.values());
  }
}

async function audience(
  subscribers: number,
  api: AudienceApi,
  options: {
    taskSize?: number;
    fail?: (invocation: number, task: FanoutTask) => boolean;
    retryPasses?: number;
  } = {},
) {
  let invocations = 0;
  let fanout: Fanout | undefined;
  const runner = new InProcessTaskRunner(
    (task) => invocation.run(++invocations, () => fanout!.runTask(task)),
    (task, n) => options.fail?.(n, task) ?? false,
  );
  const delivery = gatewayHarness({
    api,
    store: (clock) => new MemoryConnectionStore({ clock }),
    delivery: {
      retryPasses: options.retryPasses ?? 5,
      retryBackoffMs: 1,
      tasks: { runner, taskSize: options.taskSize ?? 500, retryBudgetMs: 5_000 },
    },
  });
  const { store, logger } = delivery;
  fanout = delivery.fanout;
  const ids: string[] = [];
  const subscribe = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const connectionId = `conn-${ids.length}`;
      ids.push(connectionId);
      await store.addSubscription({ connectionId, stream: 'live', identifier: 'id' });
    }
  };
  await subscribe(subscribers);
  let offset = 0;
  const broadcast = async () => {
    offset++;
    await invocation.run(0, () =>
      delivery.broker.handleBroadcast({
        stream: 'live',
        data: String(offset),
        meta: { sourceOffset: String(offset) },
      }),
    );
  };
  return {
    store,
    fanout: delivery.fanout,
    broker: delivery.broker,
    revocations: delivery.revocations,
    runner,
    logger,
    ids,
    subscribe,
    broadcast,
  };
}

describe('FanoutTree: a large audience is delivered by tasks of bounded work', () => {
  it('delivers 100,000 subscribers each frame once and in order, no invocation posting more than a task', async () => {
    const api = new AudienceApi();
    const t = await audience(100_000, api);
    const frames = 4;
    for (let n = 0; n < frames; n++) await t.broadcast();

    const expected = Array.from({ length: frames }, (_, i) => i + 1);
    let wrong = 0;
    for (const id of t.ids)
      if (JSON.stringify(api.offsets.get(id)) !== JSON.stringify(expected)) wrong++;
    expect(wrong).toBe(0);
    // No invocation, the root included, posted more than a task's size.
    expect(api.maxPostsPerInvocation()).toBeLessThanOrEqual(500);
    // The root posted nothing itself: the audience is far over a task.
    expect(api.postsByInvocation.get(0) ?? 0).toBe(0);
    expect(t.runner.invocations).toBeGreaterThanOrEqual((100_000 / 500) * frames);
    expect(t.fanout.takeCounts()).toMatchObject({
      delivered: 100_000 * frames,
      undelivered: 0,
      redelivered: 0,
    });
  });

  it('spreads a large stream over more shards, and subscribers of every shard get the frames in order', async () => {
    const api = new AudienceApi();
    const t = await audience(30_000, api);
    await t.broadcast();
    // 30,000 subscribers over shards of at most 10,000: the next power of two is 4.
    expect((await t.store.readSlice({ stream: 'live', shard: 0, prefix: '' }, 1)).spread).toBe(4);
    // Newcomers go over the four shards; the first ones stay in shard 0.
    await t.subscribe(2_000);
    const inShards = await Promise.all(
      [1, 2, 3].map(
        async (shard) =>
          (await t.store.readSlice({ stream: 'live', shard, prefix: '' }, 10_000)).subscribers
            .length,
      ),
    );
    for (const n of inShards) expect(n).toBeGreaterThan(300);
    await t.broadcast();
    await t.broadcast();
    for (const id of t.ids.slice(0, 30_000)) expect(api.offsets.get(id)).toEqual([1, 2, 3]);
    for (const id of t.ids.slice(30_000)) expect(api.offsets.get(id)).toEqual([2, 3]);
    expect(api.maxPostsPerInvocation()).toBeLessThanOrEqual(500);
  });

  it('delivers a small stream inline: one invocation, no task', async () => {
    const api = new AudienceApi();
    const t = await audience(500, api);
    await t.broadcast();
    await t.broadcast();
    expect(t.runner.invocations).toBe(0);
    expect(api.postsByInvocation.get(0)).toBe(1_000);
    for (const id of t.ids) expect(api.offsets.get(id)).toEqual([1, 2]);
  });

  it('hands a slice it read whole to tasks in chunks, without reading it again', async () => {
    const api = new AudienceApi();
    const t = await audience(1_200, api);
    await t.broadcast();
    // 1,200 read at once: three chunks of at most 500, each a task.
    expect(t.runner.invocations).toBe(3);
    expect(api.postsByInvocation.get(0) ?? 0).toBe(0);
    expect(api.maxPostsPerInvocation()).toBeLessThanOrEqual(500);
  });

  it('every frame reaches every subscriber once and in order while 20% of posts are throttled', async () => {
    let posts = 0;
    // Every fifth post throttled, later passes included.
    const api = new AudienceApi(() => ++posts % 5 === 0);
    const t = await audience(12_000, api, { retryPasses: 5 });
    const frames = 5;
    for (let n = 0; n < frames; n++) await t.broadcast();
    const expected = Array.from({ length: frames }, (_, i) => i + 1);
    for (const id of t.ids) expect(api.offsets.get(id)).toEqual(expected);
    expect(api.throttles).toBeGreaterThan(12_000 * frames * 0.15);
    expect(t.fanout.takeCounts()).toMatchObject({ delivered: 12_000 * frames, undelivered: 0 });
  });

  it('runs a failed task again: no subscriber misses the frame, and its possible duplicates are counted', async () => {
    const api = new AudienceApi();
    // The third invocation fails before it starts, as a crashed Lambda instance would.
    const t = await audience(5_000, api, { fail: (n) => n === 3 });
    await t.broadcast();
    for (const id of t.ids) expect(api.offsets.get(id)).toEqual([1]);
    // The run again is one more invocation; nothing was posted twice (it crashed first).
    expect(t.runner.invocations).toBe(11);
    expect(
      t.logger.entries.some((e) => e.message === 'fan-out task failed, running it again'),
    ).toBe(true);
    expect(t.fanout.takeCounts()).toMatchObject({ delivered: 5_000 });
  });

  it('gives up a part whose task fails on every attempt, and never sends the message again to the whole audience', async () => {
    const api = new AudienceApi();
    // The task of the chunk that holds conn-0 always fails; the others work.
    const t = await audience(2_000, api, {
      fail: (_n, task) => task.subscribers?.some((s) => s.connectionId === 'conn-0') ?? false,
    });
    await t.broadcast(); // resolves: the message is done, not redelivered
    const delivered = [...api.offsets.values()].filter((o) => o.length > 0).length;
    expect(delivered).toBe(1_500);
    expect([...api.offsets.values()].every((o) => o.length === 1)).toBe(true);
    const given = t.logger.entries.filter((e) => e.message === 'fan-out part given up');
    expect(given).toHaveLength(1);
    expect(given[0]?.fields).toMatchObject({ target: 'live', subscribers: 500 });
    expect(
      t.logger.entries.filter((e) => e.message === 'fan-out task failed, running it again'),
    ).toHaveLength(2);
  });

  it('reports what the tasks did', async () => {
    const api = new AudienceApi();
    const t = await audience(20_000, api);
    const report: FanoutTaskReport = await t.fanout.runTask({
      message: { stream: 'live', data: '"x"', offset: 1, epoch: 'e' },
    });
    expect(report).toMatchObject({ sent: 20_000, subscribers: 20_000, undelivered: 0 });
    expect(report.invocations).toBe(t.runner.invocations + 1);
    expect(report.maxPosts).toBeLessThanOrEqual(500);
    expect(report.depth).toBeGreaterThanOrEqual(2);
  });
});

describe('a remote unsubscribe of a large stream: tasks of bounded work, like a broadcast', () => {
  it('removes 20,000 subscriptions, no invocation removing more than a task, and records the revocation', async () => {
    const api = new AudienceApi();
    const t = await audience(20_000, api, { taskSize: 500 });
    const removedBy = new Map<number, number>();
    const remove = t.store.removeSubscription.bind(t.store);
    t.store.removeSubscription = async (connectionId, stream, identifier) => {
      const at = invocation.getStore() ?? -1;
      removedBy.set(at, (removedBy.get(at) ?? 0) + 1);
      return remove(connectionId, stream, identifier);
    };
    await invocation.run(0, () =>
      t.broker.handleCommand({ command: 'unsubscribe', payload: { stream: 'live' } }),
    );
    expect([...removedBy.values()].reduce((a, b) => a + b, 0)).toBe(20_000);
    expect(Math.max(...removedBy.values())).toBeLessThanOrEqual(500);
    expect(removedBy.has(0)).toBe(false); // the command's own invocation only hands out tasks
    expect(t.runner.invocations).toBeGreaterThanOrEqual(40);
    const left: unknown[] = [];
    for await (const page of t.store.subscribersOf('live')) left.push(...page);
    expect(left).toEqual([]);
    await t.broadcast();
    expect(api.offsets.size).toBe(0);
    expect(
      t.logger.entries.find((e) => e.message === 'remote unsubscribe')?.fields?.subscriptions,
    ).toBe(20_000);
    const revoked = await t.revocations.revokedAt([{ kind: 'stream', name: 'live' }]);
    expect(revoked.size).toBe(1);
  });
});
