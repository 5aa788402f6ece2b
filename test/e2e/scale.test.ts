import { describe, expect, it } from 'vitest';
import { runLocalScale } from '../../bench/scale-local';

/**
 * The functions on the emulators with 10,000 subscriptions to one stream, their connections
 * stand-ins answered by a management API stand-in that throttles above 2,000 posts/s with a
 * burst of 20 (so the fan-out tasks really meet 429s, as an account's @connections quota makes
 * them). The local stack posts about 1,000 frames/s on average: with the stand-in's default
 * burst (a tenth of a second's worth) only its peaks were throttled, and on a loaded machine
 * sometimes none were.
 */
describe('the local stack with 10,000 subscribers of one stream', () => {
  it('delivers every frame to every subscriber once and in order, through deliver tasks of bounded work, while posts and Invokes are throttled', async () => {
    const result = await runLocalScale({
      subscribers: 10_000,
      frames: 3,
      ratePerSecond: 2_000,
      burst: 20,
      // Fewer `deliver` invocations at once than a frame's tasks (16 slices, each handing its
      // ~625 subscribers to 2 tasks): Invokes are refused as Lambda refuses them over its
      // concurrency, and a refused task is tried again, not lost. (At or under the 16 parents
      // that wait for their tasks, no task could run until the deadlines: see docs/scale.md.)
      invokeConcurrency: 24,
      timeoutMs: 300_000,
    });
    // The tasks' failures, if any, say why a frame went missing.
    expect(
      {
        lostFrames: result.lostFrames,
        duplicates: result.duplicates,
        outOfOrder: result.outOfOrder,
      },
      result.taskFailures.join('\n'),
    ).toEqual({ lostFrames: 0, duplicates: 0, outOfOrder: 0 });
    expect(result.everyFrameOnceInOrder).toBe(true);
    expect(result.throttledPosts).toBeGreaterThan(0);
    expect(result.throttledInvokes).toBeGreaterThan(0);
    expect(result.maxConcurrentTasks).toBeLessThanOrEqual(24);
    // Delivered by tasks: more than one invocation, none posting more than a task's 500.
    expect(result.invocations).toBeGreaterThan(1);
    expect(result.maxPostsPerInvocation).toBeGreaterThan(0);
    expect(result.maxPostsPerInvocation).toBeLessThanOrEqual(500);
  }, 420_000);
});
