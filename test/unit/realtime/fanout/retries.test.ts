import { describe, expect, it } from 'vitest';
import { AwsResourceError, type ConnectionApi, ThrottledError } from '../../../../lib/core';
import { MemoryConnectionApi } from '../../../../lib/testing';
import { gatewayHarness } from '../../../helpers/gateway';

/**
 * A management API that throttles the posts `throttled` picks (nothing is delivered then),
 * over a {@link MemoryConnectionApi} that records what was delivered.
 */
class ThrottlingApi implements ConnectionApi {
  readonly delivered = new MemoryConnectionApi();
  attempts = 0;
  throttles = 0;
  constructor(
    private readonly throttled: (connectionId: string) => boolean,
    private readonly timesOut: (connectionId: string) => boolean = () => false,
  ) {}

  async post(connectionId: string, frame: string, endpoint?: string): Promise<'sent' | 'gone'> {
    this.attempts++;
    if (this.timesOut(connectionId)) {
      throw new AwsResourceError(`PostToConnection failed for ${connectionId}: TimeoutError`, {
        resource: 'execute-api',
      });
    }
    if (this.throttled(connectionId)) {
      this.throttles++;
      // As the management API adapter reports a throttle once its own retries are spent.
      throw new ThrottledError(`PostToConnection failed for ${connectionId}: HTTP 429`, {
        resource: 'execute-api',
        ids: [connectionId],
      });
    }
    return this.delivered.post(connectionId, frame, endpoint);
  }

  async close(connectionId: string, endpoint?: string): Promise<void> {
    await this.delivered.close(connectionId, endpoint);
  }
}

async function setup(
  api: ConnectionApi,
  subscribers: number,
  retryPasses = 4,
  extra: { retryBudgetMs?: number } = {},
) {
  const { clock, store, logger, broker, fanout } = gatewayHarness({
    api,
    delivery: { retryPasses, retryBackoffMs: 1, ...extra },
  });
  const ids = Array.from({ length: subscribers }, (_, i) => `c${i}`);
  for (const connectionId of ids) {
    await store.putConnection({
      connectionId,
      identity: 'alice',
      sid: `sid-${connectionId}`,
      protocol: 'actioncable-v1-ext-json',
      connectedAt: clock.now(),
      endpoint: 'https://api.example/dev',
    });
    await store.addSubscription({ connectionId, stream: 'live', identifier: 'id', whisper: false });
  }
  return { broker, fanout, logger, ids, clock };
}

/** The offsets each connection was delivered, in arrival order. */
function offsetsOf(api: MemoryConnectionApi, connectionId: string): number[] {
  return api.framesOf(connectionId).map((f) => (f as { offset: number }).offset);
}

describe('Fanout: a post that fails is retried later, for just the connections that missed it', () => {
  it('delivers every frame to every subscriber once and in order while 20% of posts are throttled', async () => {
    // Every fifth post is throttled: 20% of all posts, later passes included.
    let posts = 0;
    const api = new ThrottlingApi(() => ++posts % 5 === 0);
    const t = await setup(api, 500);
    const broadcasts = 20;
    for (let n = 1; n <= broadcasts; n++) {
      await t.broker.handleBroadcast({
        stream: 'live',
        data: String(n),
        meta: { sourceOffset: String(n) },
      });
    }
    const expected = Array.from({ length: broadcasts }, (_, i) => i + 1);
    for (const id of t.ids) expect(offsetsOf(api.delivered, id)).toEqual(expected);
    const counts = t.fanout.takeCounts();
    expect(api.throttles).toBeGreaterThan(broadcasts * 500 * 0.15);
    expect(counts).toEqual({
      delivered: broadcasts * 500,
      undelivered: 0,
      retried: api.throttles,
      redelivered: 0,
      gone: 0,
    });
    // Only the missed posts were made again: one attempt per delivery plus one per throttle.
    expect(api.attempts).toBe(broadcasts * 500 + api.throttles);
    expect(t.fanout.takeCounts().delivered).toBe(0);
  });

  it('counts and logs a frame given up on after the last pass, with its connection and stream', async () => {
    const api = new ThrottlingApi((id) => id === 'c1');
    const t = await setup(api, 3, 2);
    await t.broker.handleBroadcast({ stream: 'live', data: '1' });
    await t.broker.handleBroadcast({ stream: 'live', data: '2' });
    expect(offsetsOf(api.delivered, 'c0')).toEqual([1, 2]);
    expect(offsetsOf(api.delivered, 'c2')).toEqual([1, 2]);
    expect(offsetsOf(api.delivered, 'c1')).toEqual([]);
    // The first post and two later passes; then, given up on, c1 gets no later pass.
    expect(api.throttles).toBe(3 + 1);
    expect(t.fanout.takeCounts()).toMatchObject({ delivered: 4, undelivered: 2, retried: 2 });
    const undelivered = t.logger.entries.filter(
      (e) => e.message === 'broadcast: frame undelivered',
    );
    expect(undelivered).toHaveLength(2);
    expect(undelivered[0]?.fields).toMatchObject({
      target: 'live',
      connectionId: 'c1',
      retried: 2,
    });
  });

  it('gives a connection it gave up on no later passes for a while, so it cannot hold up its stream', async () => {
    const api = new ThrottlingApi((id) => id === 'c1');
    const t = await setup(api, 2, 3);
    await t.broker.handleBroadcast({ stream: 'live', data: '1' });
    expect(api.throttles).toBe(4);
    await t.broker.handleBroadcast({ stream: 'live', data: '2' });
    expect(api.throttles).toBe(5);
    t.clock.advance(60_000);
    await t.broker.handleBroadcast({ stream: 'live', data: '3' });
    expect(api.throttles).toBe(9);
    expect(t.fanout.takeCounts()).toMatchObject({ undelivered: 3, delivered: 3 });
  });

  it('stops the later passes when their time budget is spent', async () => {
    const api = new ThrottlingApi((id) => id === 'c1');
    const t = await setup(api, 2, 100, { retryBudgetMs: 0 });
    await t.broker.handleBroadcast({ stream: 'live', data: '1' });
    expect(api.throttles).toBe(1);
    expect(t.fanout.takeCounts()).toMatchObject({ undelivered: 1, retried: 0 });
  });

  it('does not retry a post that failed otherwise than by a throttle: it may have been delivered', async () => {
    const api = new ThrottlingApi(
      () => false,
      (id) => id === 'c0',
    );
    const t = await setup(api, 2, 3);
    await t.broker.handleBroadcast({ stream: 'live', data: '1' });
    expect(api.attempts).toBe(2);
    expect(t.fanout.takeCounts()).toMatchObject({ delivered: 1, undelivered: 1, retried: 0 });
  });

  it('gives up at once with no later pass when retryPasses is 0', async () => {
    const api = new ThrottlingApi((id) => id === 'c0');
    const t = await setup(api, 2, 0);
    await t.broker.handleBroadcast({ stream: 'live', data: '1' });
    expect(api.attempts).toBe(2);
    expect(t.fanout.takeCounts()).toMatchObject({ delivered: 1, undelivered: 1, retried: 0 });
  });

  it('counts the frames of a redelivered message as possible duplicates', async () => {
    const api = new ThrottlingApi(() => false);
    const t = await setup(api, 4);
    const msg = { stream: 'live', data: 'x', meta: { sourceOffset: '7' } };
    await t.broker.handleBroadcast(msg);
    await t.broker.handleBroadcast(msg);
    expect(offsetsOf(api.delivered, 'c0')).toEqual([1, 1]);
    expect(t.fanout.takeCounts()).toMatchObject({ delivered: 8, redelivered: 4 });
  });
});
