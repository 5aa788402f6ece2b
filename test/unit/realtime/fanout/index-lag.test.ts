import { describe, expect, it } from 'vitest';
import type { Fanout } from '../../../../lib/core';
import { INDEX_POLL_MAX_MS, INDEX_WAIT_MS } from '../../../../lib/realtime/fanout/unsubscribe';
import { InProcessTaskRunner } from '../../../../lib/testing';
import { FakeClock } from '../../../helpers/clock';
import { gatewayHarness, pubsub } from '../../../helpers/gateway';
import { type IndexLag, LaggingIndexStore } from '../../../helpers/lagging-index';

const room = pubsub('room');

/**
 * The gateway and the fan-out over a {@link LaggingIndexStore}: the stream index lags as a
 * GSI does on AWS, and the remote `unsubscribe`'s pauses move the fake clock (the model's
 * time), so that a wait of seconds runs at once. `tasks`: an audience over 2 goes to fan-out
 * tasks, as a large stream's does.
 */
function setup(lag: Omit<IndexLag, 'clock'>, { tasks = false } = {}) {
  const clock = new FakeClock();
  const paused: number[] = [];
  let fanout: Fanout | undefined;
  const runner = new InProcessTaskRunner((task) => fanout!.runTask(task));
  const t = gatewayHarness({
    clock,
    config: { publicStreams: true },
    store: () => new LaggingIndexStore({ clock, ...lag }),
    delivery: {
      sleep: async (ms) => {
        paused.push(ms);
        clock.advance(ms);
      },
      ...(tasks ? { tasks: { runner, taskSize: 2 } } : {}),
    },
  });
  fanout = t.fanout;
  const unsubscribe = (payload: Record<string, unknown>) =>
    t.broker.handleCommand({ command: 'unsubscribe', payload });
  const pausedMs = () => paused.reduce((a, b) => a + b, 0);
  return { ...t, store: t.store as LaggingIndexStore, runner, unsubscribe, pausedMs };
}

/** Connections `ids`, each opened as `identity` and subscribed to `room`. */
async function subscribeAll(t: ReturnType<typeof setup>, ids: readonly [string, string][]) {
  for (const [connectionId, sub] of ids) {
    await t.open(connectionId, { sub });
    await t.subscribe(connectionId, room);
  }
}

const logged = (t: ReturnType<typeof setup>, message: string) =>
  t.logger.entries.find((e) => e.message === message)?.fields;

describe('a remote unsubscribe over a stream index that lags (a model of a GSI on AWS)', () => {
  it('stream-wide: a broadcast committed after it reaches no removed subscriber', async () => {
    const t = setup({ removeMs: 700 });
    await subscribeAll(t, [
      ['a1', 'alice'],
      ['b1', 'bob'],
    ]);
    await t.unsubscribe({ stream: 'room' });
    await t.publish('room', 'after');
    expect(t.messagesOf('a1')).toEqual([]);
    expect(t.messagesOf('b1')).toEqual([]);
    // The model did lag: the command read the index listing them, and waited it out.
    expect(t.store.staleReads).toBeGreaterThan(0);
    expect(t.pausedMs()).toBeGreaterThanOrEqual(700);
    expect(logged(t, 'remote unsubscribe')).toMatchObject({ subscriptions: 2 });
    expect(logged(t, 'remote unsubscribe')?.indexChecks).toBeGreaterThan(1);
    expect(t.logger.warnings()).toEqual([]);
  });

  it('{ stream, identity }: only that identity misses the broadcast after it', async () => {
    const t = setup({ removeMs: 700 });
    await subscribeAll(t, [
      ['a1', 'alice'],
      ['a2', 'alice'],
      ['b1', 'bob'],
    ]);
    await t.unsubscribe({ stream: 'room', identity: 'alice' });
    await t.publish('room', 'after');
    expect(t.messagesOf('a1')).toEqual([]);
    expect(t.messagesOf('a2')).toEqual([]);
    expect(t.messagesOf('b1')).toEqual(['after']);
    expect(t.store.staleReads).toBeGreaterThan(0);
    expect(t.pausedMs()).toBeGreaterThanOrEqual(700);
    expect(logged(t, 'remote unsubscribe')).toMatchObject({ identity: 'alice', subscriptions: 2 });
  });

  it('stream-wide through fan-out tasks: the wait covers the removal the tasks did', async () => {
    const t = setup({ removeMs: 700 }, { tasks: true });
    const ids = Array.from({ length: 7 }, (_, i) => [`c${i}`, `user-${i}`] as [string, string]);
    await subscribeAll(t, ids);
    await t.unsubscribe({ stream: 'room' });
    // The removal went through tasks (the audience is over a task's 2).
    expect(t.runner.invocations).toBeGreaterThan(0);
    await t.publish('room', 'after');
    for (const [c] of ids) expect(t.messagesOf(c)).toEqual([]);
    expect(t.store.staleReads).toBeGreaterThan(0);
    expect(logged(t, 'remote unsubscribe')).toMatchObject({ subscriptions: 7 });
  });

  it('removes a subscription the removal missed (not yet indexed) once the index lists it', async () => {
    const t = setup({ removeMs: 300, addMs: 100 });
    await subscribeAll(t, [['a1', 'alice']]);
    t.clock.advance(200);
    // Stored a moment before the command: the index does not list it when the removal reads.
    await subscribeAll(t, [['late', 'carol']]);
    await t.unsubscribe({ stream: 'room' });
    await t.publish('room', 'after');
    expect(t.messagesOf('a1')).toEqual([]);
    expect(t.messagesOf('late')).toEqual([]);
    expect(await t.store.subscriptionsOf('late')).toEqual([]);
    expect(logged(t, 'remote unsubscribe')).toMatchObject({ subscriptions: 2 });
    expect(t.logger.warnings()).toEqual([]);
  });

  it('waits no longer than the bound for an index that never catches up: a WARN, and the command returns', async () => {
    const t = setup({ removeMs: Number.POSITIVE_INFINITY });
    await subscribeAll(t, [
      ['a1', 'alice'],
      ['b1', 'bob'],
    ]);
    await t.unsubscribe({ stream: 'room', identity: 'alice' });
    expect(t.pausedMs()).toBeGreaterThanOrEqual(INDEX_WAIT_MS);
    expect(t.pausedMs()).toBeLessThan(INDEX_WAIT_MS + INDEX_POLL_MAX_MS);
    const warn = t.logger.at('warn');
    expect(warn.map((w) => w.message)).toEqual([
      'remote unsubscribe: the stream index still lists removed subscriptions',
    ]);
    expect(warn[0]?.fields).toMatchObject({
      stream: 'room',
      identity: 'alice',
      removed: 1,
      listed: 1,
      pausedMs: t.pausedMs(),
    });
    expect(warn[0]?.fields?.checks).toBeGreaterThan(20);
    // Past the bound the gap is as before: the stale index still reaches the removed one.
    await t.publish('room', 'after');
    expect(t.messagesOf('a1')).toEqual(['after']);

    const wide = setup({ removeMs: Number.POSITIVE_INFINITY });
    await subscribeAll(wide, [['a1', 'alice']]);
    await wide.unsubscribe({ stream: 'room' });
    expect(wide.logger.at('warn')[0]?.fields).toMatchObject({ stream: 'room', removed: 1 });
    expect(wide.pausedMs()).toBeLessThan(INDEX_WAIT_MS + INDEX_POLL_MAX_MS);
  });

  it('reads the index once when it is caught up, and pauses not at all', async () => {
    const t = setup({ removeMs: 0 });
    await subscribeAll(t, [['a1', 'alice']]);
    await t.unsubscribe({ stream: 'room' });
    await t.unsubscribe({ stream: 'room', identity: 'alice' });
    expect(t.pausedMs()).toBe(0);
    const checks = t.logger.entries
      .filter((e) => e.message === 'remote unsubscribe')
      .map((e) => e.fields?.indexChecks);
    // Targeted with nothing removed: nothing to wait for, no read.
    expect(checks).toEqual([1, 0]);
  });
});
