import { describe, expect, it } from 'vitest';
import { type ConsumedMessage, consumeSqsBatch } from '../../../lib/aws';
import {
  AckManager,
  AckManagerError,
  type AckStore,
  ackPartition,
  PartitionAckManager,
} from '../../../lib/core';
import { applyAckUpdate, isAcked } from '../../../lib/messaging/ack-store';
import { MemoryAckStore, MemoryQueue } from '../../../lib/testing';
import { FakeClock } from '../../helpers/clock';
import { invokeOnMemoryQueue, memorySqsEvent } from '../../helpers/memory-lambda';

function levels(m: AckManager): [bigint, bigint] {
  return [m.getAckLevel(), m.getReadLevel()];
}

describe('AckManager', () => {
  it('starts with both levels at -1', () => {
    expect(levels(new AckManager())).toEqual([-1n, -1n]);
  });

  it('follows the Cadence sequence of levels', () => {
    const m = new AckManager();
    m.setAckLevel(100n);
    expect(levels(m)).toEqual([100n, 100n]);
    m.readItem(200n);
    expect(levels(m)).toEqual([100n, 200n]);
    m.readItem(220n);
    expect(levels(m)).toEqual([100n, 220n]);
    expect(m.ackItem(220n)).toBe(100n);
    expect(m.ackItem(200n)).toBe(220n);
    m.setAckLevel(300n);
    expect(levels(m)).toEqual([300n, 300n]);
    m.readItem(320n);
    m.readItem(340n);
    expect(m.ackItem(320n)).toBe(320n);
    expect(m.ackItem(340n)).toBe(340n);
    m.setReadLevel(360n);
    expect(m.getReadLevel()).toBe(360n);
    expect(m.getAckLevel()).toBe(340n);
  });

  it('sets the ack level just below the first id read', () => {
    const m = new AckManager();
    m.readItem(5n);
    expect(levels(m)).toEqual([4n, 5n]);
  });

  it('rejects an id at or below the read level without counting it', () => {
    const m = new AckManager();
    m.readItem(10n);
    expect(() => m.readItem(10n)).toThrow(AckManagerError);
    expect(() => m.readItem(7n)).toThrow(/7 <= 10/);
    expect(m.getBacklogCount()).toBe(1);
  });

  it('skips ids that were never read', () => {
    const m = new AckManager();
    m.readItem(1n);
    m.readItem(1_000_000_000_000n);
    m.ackItem(1_000_000_000_000n);
    expect(m.ackItem(1n)).toBe(1_000_000_000_000n);
  });

  it('changes nothing when acking an unknown or already acked id', () => {
    const m = new AckManager();
    m.readItem(1n);
    m.readItem(2n);
    m.readItem(3n);
    expect(m.ackItem(2n)).toBe(0n);
    expect(m.ackItem(2n)).toBe(0n);
    expect(m.ackItem(99n)).toBe(0n);
    expect(m.getBacklogCount()).toBe(2);
    expect(m.ackItem(1n)).toBe(2n);
    expect(m.ackItem(1n)).toBe(2n);
    expect(m.getBacklogCount()).toBe(1);
  });

  it('counts read but unacked items as backlog', () => {
    const m = new AckManager();
    for (let i = 1n; i <= 5n; i++) m.readItem(i * 10n);
    expect(m.getBacklogCount()).toBe(5);
    m.ackItem(30n);
    m.ackItem(10n);
    expect(m.getBacklogCount()).toBe(3);
  });

  it('never lowers the ack level', () => {
    const m = new AckManager();
    m.setAckLevel(50n);
    m.setAckLevel(20n);
    expect(levels(m)).toEqual([50n, 50n]);
  });

  it('treats outstanding ids at or below a raised ack level as acked', () => {
    const m = new AckManager();
    m.readItem(1n);
    m.readItem(2n);
    m.readItem(3n);
    m.setAckLevel(2n);
    expect(m.getBacklogCount()).toBe(1);
    expect(m.ackItem(1n)).toBe(2n);
    expect(m.ackItem(3n)).toBe(3n);
  });

  it('refuses a read level below an outstanding id', () => {
    const m = new AckManager();
    m.readItem(10n);
    expect(() => m.setReadLevel(5n)).toThrow(AckManagerError);
  });

  it('acks in cost proportional to outstanding items, not to gaps', () => {
    const m = new AckManager();
    const gap = 10_000_000_000n;
    const n = 20_000;
    for (let i = 1; i <= n; i++) m.readItem(BigInt(i) * gap);
    for (let i = n; i >= 1; i--) m.ackItem(BigInt(i) * gap);
    // A gap-scanning implementation would loop ~2·10^14 times here and never finish.
    expect(m.getAckLevel()).toBe(BigInt(n) * gap);
    expect(m.getBacklogCount()).toBe(0);
  });

  it('lists the ids read and not acked', () => {
    const m = new AckManager();
    for (const id of [10n, 20n, 30n, 40n]) m.readItem(id);
    m.ackItem(20n);
    m.ackItem(10n);
    m.ackItem(40n);
    expect(m.getOutstandingIds()).toEqual([30n]);
    m.setAckLevel(35n);
    expect(m.getOutstandingIds()).toEqual([]);
  });

  it('keeps levels right across window compaction', () => {
    const m = new AckManager();
    for (let i = 1n; i <= 5000n; i++) m.readItem(i);
    for (let i = 1n; i <= 4000n; i++) m.ackItem(i);
    m.readItem(5001n);
    expect(m.ackItem(4002n)).toBe(4000n);
    expect(m.ackItem(4001n)).toBe(4002n);
    expect(m.getBacklogCount()).toBe(999);
  });
});

describe('PartitionAckManager', () => {
  it('keeps one manager per partition', () => {
    const p = new PartitionAckManager();
    p.readItem('a', 10n);
    p.readItem('b', 100n);
    p.readItem('a', 11n);
    expect(p.complete('a', 11n)).toBe(9n);
    expect(p.complete('b', 100n)).toBe(100n);
    expect(p.complete('a', 10n)).toBe(11n);
    expect(p.partitions().sort()).toEqual(['a', 'b']);
    expect(p.ackLevel('a')).toBe(11n);
  });

  it('throws on completing a partition never read', () => {
    const p = new PartitionAckManager();
    expect(() => p.complete('nope', 1n)).toThrow(AckManagerError);
    expect(() => p.complete('nope', 1n)).toThrow(/nope/);
  });
});

describe('AckState (level + open holes)', () => {
  const now = 1_000;

  it('raises the level over failed offsets and keeps them as holes', () => {
    const s = applyAckUpdate(undefined, { level: 12n, open: [10n, 11n], now });
    expect(s.ackLevel).toBe(12n);
    expect([...s.holes.keys()]).toEqual([10n, 11n]);
    expect(isAcked(s, 12n)).toBe(true);
    expect(isAcked(s, 10n)).toBe(false);
    expect(isAcked(s, 13n)).toBe(false);
  });

  it('closes a hole only on its success, and never lowers the level', () => {
    const a = applyAckUpdate(undefined, { level: 12n, open: [10n], now });
    const b = applyAckUpdate(a, { level: 5n, close: [10n], now });
    expect(b.ackLevel).toBe(12n);
    expect(b.holes.size).toBe(0);
    expect(isAcked(b, 10n)).toBe(true);
    expect(b.version).toBe(a.version + 1);
  });

  it('keeps a failure that a concurrent writer with a higher level merged first', () => {
    const ahead = applyAckUpdate(undefined, { level: 40n, open: [39n], now });
    const merged = applyAckUpdate(ahead, { level: 10n, open: [9n], now });
    expect(merged.ackLevel).toBe(40n);
    expect([...merged.holes.keys()].sort((a, b) => (a < b ? -1 : 1))).toEqual([9n, 39n]);
  });

  it('forgets holes older than the retention', () => {
    const a = applyAckUpdate(undefined, { level: 3n, open: [3n], now });
    expect(applyAckUpdate(a, { now: now + 99, holeRetentionMs: 100 }).holes.size).toBe(1);
    expect(applyAckUpdate(a, { now: now + 101, holeRetentionMs: 100 }).holes.size).toBe(0);
  });
});

describe('consumeSqsBatch on a memory queue: DLQ redrive', () => {
  const quiet = { error: () => {}, warn: () => {} };
  const bytes = (s: string) => new TextEncoder().encode(s);
  const text = (b: Uint8Array) => new TextDecoder().decode(b);

  function queueOf(values: string[], key = 'p') {
    const queue = new MemoryQueue({ maxReceiveCount: 3, backoff: () => 0 });
    values.forEach((v, i) => {
      // Gapped offsets, like SQS / stream sequence numbers.
      const offset = 10_000_000_000n * BigInt(i + 1);
      queue.enqueue({ id: v, key, value: bytes(v), headers: {}, type: undefined, offset });
    });
    return queue;
  }

  async function drain(
    queue: MemoryQueue,
    handler: (m: ConsumedMessage, crash: () => Promise<never>) => Promise<void>,
    store: MemoryAckStore,
  ) {
    for (let i = 0; i < 100; i++) {
      if (
        (await invokeOnMemoryQueue(queue, handler, { group: 'g', ackStore: store, logger: quiet }))
          .received === 0
      )
        return;
    }
    throw new Error('queue did not drain');
  }

  it('handles a redriven poison message exactly once after later offsets succeeded', async () => {
    const queue = queueOf(['poison', 'n1', 'n2']);
    const store = new MemoryAckStore();
    const calls: string[] = [];
    let fixed = false;
    const handler = async (m: ConsumedMessage) => {
      calls.push(text(m.value));
      if (text(m.value) === 'poison' && !fixed) throw new Error('cannot handle');
    };
    await drain(queue, handler, store);
    expect(queue.deadLetters.map((d) => text(d.message.value))).toEqual(['poison']);
    expect(calls).toEqual(['poison', 'poison', 'poison', 'n1', 'n2']);
    expect(await store.load('g', ackPartition('t', 'p'))).toBe(30_000_000_000n);

    fixed = true;
    expect(queue.redrive()).toBe(1);
    await drain(queue, handler, store);
    expect(calls.filter((c) => c === 'poison')).toHaveLength(4); // the redrive: once
    expect((await store.loadState('g', ackPartition('t', 'p')))?.holes.size).toBe(0);

    // Redriven (or delivered) once more after its success: done, not handled again.
    queue.enqueue({
      id: 'poison-again',
      key: 'p',
      value: bytes('poison'),
      headers: {},
      type: undefined,
      offset: 10_000_000_000n,
    });
    await drain(queue, handler, store);
    expect(calls.filter((c) => c === 'poison')).toHaveLength(4);
    expect(queue.size()).toBe(0);
  });

  it('keeps a hole for a message whose every delivery crashed before the ack write', async () => {
    const queue = queueOf(['crasher', 'n1']);
    const store = new MemoryAckStore();
    const calls: string[] = [];
    let fixed = false;
    await drain(
      queue,
      async (m, crash) => {
        calls.push(text(m.value));
        if (text(m.value) === 'crasher' && !fixed) await crash();
      },
      store,
    );
    expect(queue.deadLetters.map((d) => text(d.message.value))).toEqual(['crasher']);
    expect(calls).toEqual(['crasher', 'crasher', 'crasher', 'n1']);
    fixed = true;
    queue.redrive();
    await drain(queue, async (m) => void calls.push(text(m.value)), store);
    expect(calls.filter((c) => c === 'crasher')).toHaveLength(4);
  });

  it('fails the records of a partition whose ack write failed; their redelivery is handled again and then recorded', async () => {
    const queue = queueOf(['x']);
    const base = new MemoryAckStore();
    let failures = 1;
    const store: AckStore = {
      load: (g, p) => base.load(g, p),
      save: (g, p, l) => base.save(g, p, l),
      loadState: (g, p) => base.loadState(g, p),
      commit: async (g, p, u) => {
        if (failures-- > 0) throw new Error('throttled');
        return base.commit(g, p, u);
      },
    };
    const receiveCounts: number[] = [];
    const responses: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const { response } = await invokeOnMemoryQueue(
        queue,
        async (m) => void receiveCounts.push(m.receiveCount),
        { group: 'g', ackStore: store, logger: quiet },
      );
      responses.push(response?.batchItemFailures.length);
    }
    // At least once: handled again, flagged as a redelivery; then done.
    expect(receiveCounts).toEqual([1, 2]);
    expect(responses).toEqual([1, 0, undefined]);
    expect(isAcked(await base.loadState('g', ackPartition('t', 'p')), 10_000_000_000n)).toBe(true);
  });

  it('keeps holes for messages skipped behind a failure of their group', async () => {
    const queue = queueOf(['a', 'b', 'c']);
    const [a] = queue.receive();
    // SQS may hand a group's a, b and c to one invocation; fauxqs and MemoryQueue give one.
    const store = new MemoryAckStore();
    const heads = [a!, { ...a!, id: 'b', value: bytes('b'), offset: 20_000_000_000n }];
    const calls: string[] = [];
    const response = await consumeSqsBatch(
      memorySqsEvent(heads),
      async (m) => {
        calls.push(text(m.value));
        if (text(m.value) === 'a') throw new Error('no');
      },
      { group: 'g', ackStore: store, logger: quiet },
    );
    expect(response.batchItemFailures).toHaveLength(2);
    expect(calls).toEqual(['a']);
    const state = await store.loadState('g', ackPartition('t', 'p'));
    expect(state?.ackLevel).toBe(20_000_000_000n);
    expect([...(state?.holes.keys() ?? [])]).toEqual([10_000_000_000n, 20_000_000_000n]);
    // b comes back (a retry, or a redrive after both were dead-lettered): it is handled.
    const again = await consumeSqsBatch(
      memorySqsEvent([heads[1]!]),
      async (m) => void calls.push(text(m.value)),
      { group: 'g', ackStore: store, logger: quiet },
    );
    expect(again.batchItemFailures).toEqual([]);
    expect(calls).toEqual(['a', 'b']);
  });
});

describe('ack state lifecycle', () => {
  const quiet = { error: () => {}, warn: () => {} };
  const bytes = (s: string) => new TextEncoder().encode(s);
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  const day = 24 * 3600 * 1000;

  function setup() {
    const clock = new FakeClock();
    const queue = new MemoryQueue({ maxReceiveCount: 1, backoff: () => 0 });
    const store = new MemoryAckStore({ now: () => clock.now() });
    const calls: string[] = [];
    let failing = new Set<string>();
    const handler = async (m: ConsumedMessage) => {
      calls.push(text(m.value));
      if (failing.has(text(m.value))) throw new Error('cannot handle');
    };
    const send = (value: string, offset: bigint) =>
      queue.enqueue({
        id: value,
        key: 'p',
        value: bytes(value),
        headers: {},
        type: undefined,
        offset,
      });
    const drain = async () => {
      while (
        (
          await invokeOnMemoryQueue(queue, handler, {
            group: 'g',
            ackStore: store,
            logger: quiet,
            now: () => clock.now(),
          })
        ).received > 0
      );
    };
    return {
      clock,
      queue,
      store,
      calls,
      send,
      drain,
      fail: (...values: string[]) => {
        failing = new Set(values);
      },
    };
  }

  it('handles a message below the floor of a state created again after its item expired', async () => {
    const t = setup();
    t.fail('old');
    t.send('old', 10n);
    await t.drain();
    expect(t.queue.deadLetters).toHaveLength(1);
    // A month on, the ack item has expired (and the hole with it); the key comes back.
    t.clock.advance(31 * day);
    expect(t.store.size()).toBe(0);
    t.send('new', 20n);
    await t.drain();
    expect((await t.store.loadState('g', ackPartition('t', 'p')))?.floor).toBe(20n);
    t.fail();
    t.queue.redrive();
    await t.drain();
    expect(t.calls).toEqual(['old', 'new', 'old']);
  });

  it('stamps a hole anew when its redriven message fails again, so it outlives the retention from then', async () => {
    const t = setup();
    t.fail('poison');
    t.send('poison', 10n);
    await t.drain();
    t.clock.advance(20 * day);
    t.queue.redrive();
    await t.drain(); // fails again: back to the DLQ, the hole stamped now
    t.clock.advance(10 * day);
    t.send('later', 20n); // 30 days after the first failure, 10 after the last
    await t.drain();
    expect([
      ...((await t.store.loadState('g', ackPartition('t', 'p')))?.holes.keys() ?? []),
    ]).toEqual([10n]);
    t.fail();
    t.clock.advance(day);
    t.queue.redrive();
    await t.drain();
    expect(t.calls).toEqual(['poison', 'poison', 'later', 'poison']);
  });

  it('gives up holes past maxHoles for a floor above the level: nothing up to it counts as done', () => {
    const now = 1;
    const s = applyAckUpdate(undefined, {
      level: 30n,
      open: [10n, 20n, 30n],
      floor: 5n,
      now,
      maxHoles: 2,
    });
    expect(s.holes.size).toBe(0);
    expect(s.floor).toBe(31n);
    for (const offset of [5n, 10n, 25n, 30n]) expect(isAcked(s, offset)).toBe(false);
    const next = applyAckUpdate(s, { level: 40n, floor: 35n, now });
    expect(next.floor).toBe(31n);
    expect(isAcked(next, 40n)).toBe(true);
  });

  it('keeps the floor a state was created with', () => {
    const s = applyAckUpdate(undefined, { level: 30n, floor: 20n, now: 1 });
    expect(isAcked(s, 19n)).toBe(false);
    expect(isAcked(s, 20n)).toBe(true);
    expect(applyAckUpdate(s, { level: 50n, floor: 45n, now: 2 }).floor).toBe(20n);
  });
});
