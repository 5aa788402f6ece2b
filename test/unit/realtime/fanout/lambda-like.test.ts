import { describe, expect, it } from 'vitest';
import type {
  ConnectionApi,
  Fanout,
  FanoutTaskRunner,
  FanoutTasksOptions,
} from '../../../../lib/core';
import { MemoryConnectionStore } from '../../../../lib/testing';
import { seededRandom } from '../../../helpers/faults';
import { fanoutOver, LambdaLikeRunner, type Unkindness } from '../../../helpers/lambda-like';

/** The offsets each connection was posted, in the order posted. */
class OrderApi implements ConnectionApi {
  readonly offsets = new Map<string, number[]>();
  async post(connectionId: string, frame: string): Promise<'sent'> {
    const { offset } = JSON.parse(frame) as { offset: number };
    this.offsets.set(connectionId, [...(this.offsets.get(connectionId) ?? []), offset]);
    return 'sent';
  }
  async close(): Promise<void> {}
}

/** Quick deadlines, so that waiting out an orphan takes a fraction of a second. */
const TIMING = { rootBudgetMs: 1_200, levelReserveMs: 200, fenceMs: 60, refusedBackoffMs: 2 };

/**
 * `frames` broadcasts, one after another as the broadcast consumer sends a stream's, to
 * `subscribers` connections in tasks of 10, under the unkind runner.
 */
async function broadcastUnder(
  unkind: Unkindness,
  seed: number,
  timing: FanoutTasksOptions['timing'] = TIMING,
  { subscribers = 200, frames = 4 } = {},
) {
  const store = new MemoryConnectionStore();
  for (let i = 0; i < subscribers; i++) {
    await store.addSubscription({ connectionId: `c${i}`, stream: 'live', identifier: 'id' });
  }
  const api = new OrderApi();
  const random = seededRandom(seed);
  const tasks = { taskSize: 10, retryBudgetMs: 200, ...(timing ? { timing } : {}) };
  const build = (post: ConnectionApi, invoke: FanoutTaskRunner): Fanout =>
    fanoutOver(store, post, invoke, tasks);
  const runner = new LambdaLikeRunner(build, api, unkind, random);
  const root = build(api, runner);
  for (let offset = 1; offset <= frames; offset++) {
    await root.broadcast({ stream: 'live', data: '"x"', offset, epoch: 'e' });
  }
  await Promise.all(runner.background);
  const outOfOrder = [...api.offsets.values()].filter((list) =>
    list.some((offset, i) => i > 0 && offset < list[i - 1]!),
  ).length;
  const lost = [...api.offsets.values()].reduce(
    (n, list) => n + frames - new Set(list).size,
    (subscribers - api.offsets.size) * frames,
  );
  const duplicates = [...api.offsets.values()].reduce(
    (n, list) => n + list.length - new Set(list).size,
    0,
  );
  return { outOfOrder, lost, duplicates, counts: runner.counts };
}

const UNKIND: Unkindness = {
  orphan: 0.05,
  kill: 0.05,
  throttle: 0.2,
  concurrencyLimit: 12,
  coldStartMs: 5,
  postMs: 3,
};

describe('the fan-out under a Lambda-like runner (orphans, kills, throttled Invokes, cold starts)', () => {
  it.each([1, 2, 3])(
    'never posts frame k+1 to a connection before frame k has reached it or been given up (seed %i)',
    async (seed) => {
      const { outOfOrder, counts, duplicates } = await broadcastUnder(UNKIND, seed);
      // The runner was unkind in this run.
      expect(counts.orphaned + counts.killed).toBeGreaterThan(0);
      expect(counts.throttled).toBeGreaterThan(0);
      expect(outOfOrder).toBe(0);
      // A run again posts its part (10 subscribers) again: duplicates stay within the parts
      // whose invocation was orphaned or killed.
      expect(duplicates).toBeLessThanOrEqual((counts.orphaned + counts.killed) * 10);
    },
    30_000,
  );

  it('delivers every frame once when the runner is kind', async () => {
    const kind = { ...UNKIND, orphan: 0, kill: 0, throttle: 0, concurrencyLimit: 1_000 };
    expect(await broadcastUnder(kind, 7)).toMatchObject({ outOfOrder: 0, lost: 0, duplicates: 0 });
  });

  it('retries a throttled Invoke until it runs: nothing lost, nothing twice', async () => {
    const throttled = { ...UNKIND, orphan: 0, kill: 0, throttle: 0.5 };
    const result = await broadcastUnder(throttled, 11);
    expect(result.counts.throttled).toBeGreaterThan(10);
    expect(result).toMatchObject({ outOfOrder: 0, lost: 0, duplicates: 0 });
  });
});
