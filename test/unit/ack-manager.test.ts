import { describe, expect, it } from 'vitest';
import { AckManager, AckManagerError, PartitionAckManager } from '../../lib';

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
