import { describe, expect, it } from 'vitest';
import { defaultBrokerConfig, HistoryError, LegacyBroker, StreamsTracker } from '../../../lib/core';
import { MemoryBroker, MemorySessionCache } from '../../../lib/testing';
import { brokerContract } from '../../contract/broker';
import { RecordingBroadcaster } from '../../helpers/broadcaster';

brokerContract('MemoryBroker', (o) => new MemoryBroker(o));
brokerContract(
  'MemoryBroker over a MemorySessionCache of its own',
  (o) => new MemoryBroker({ ...o, sessions: new MemorySessionCache(o) }),
);

describe('defaultBrokerConfig', () => {
  it('is 300 s history, 100 messages, 300 s sessions', () => {
    expect(defaultBrokerConfig()).toEqual({ historyTtl: 300, historyLimit: 100, sessionsTtl: 300 });
  });

  it('rejects a non-positive setting', () => {
    expect(
      () =>
        new MemoryBroker({ broadcaster: new RecordingBroadcaster(), config: { historyLimit: 0 } }),
    ).toThrow(/historyLimit/);
  });
});

describe('MemoryBroker', () => {
  it('announces itself as the memory broker', () => {
    expect(new MemoryBroker({ broadcaster: new RecordingBroadcaster() }).announce()).toMatch(
      /memory/,
    );
  });
});

describe('MemoryBroker epochs (AnyCable Memory.GetEpoch / SetEpoch, per stream)', () => {
  it('reads a stream epoch, and a set epoch makes history under the old one fail while offsets go on', async () => {
    const b = new RecordingBroadcaster();
    const broker = new MemoryBroker({ broadcaster: b });
    expect(broker.getEpoch('s')).toBeUndefined();
    await broker.handleBroadcast({ stream: 's', data: 'one' });
    const first = broker.getEpoch('s')!;
    expect(b.messages.at(-1)).toMatchObject({ epoch: first, offset: 1 });
    broker.setEpoch('s', 'e2');
    expect(broker.getEpoch('s')).toBe('e2');
    await expect(broker.historyFrom('s', first, 0)).rejects.toBeInstanceOf(HistoryError);
    await broker.handleBroadcast({ stream: 's', data: 'two' });
    expect(b.messages.at(-1)).toMatchObject({ epoch: 'e2', offset: 2 });
    expect((await broker.historyFrom('s', 'e2', 1)).map((m) => m.data)).toEqual(['two']);
    // A stream given an epoch before its first broadcast starts at offset 1 under it.
    broker.setEpoch('t', 'fixed');
    await broker.handleBroadcast({ stream: 't', data: 'x' });
    expect(b.messages.at(-1)).toMatchObject({ stream: 't', epoch: 'fixed', offset: 1 });
  });
});

describe('StreamsTracker', () => {
  it('says isNew only for the first add and isLast only for the last remove', () => {
    const t = new StreamsTracker();
    expect([t.add('s'), t.add('s'), t.add('s')]).toEqual([true, false, false]);
    expect(t.has('s')).toBe(true);
    expect([t.remove('s'), t.remove('s'), t.remove('s')]).toEqual([false, false, true]);
    expect(t.has('s')).toBe(false);
  });

  it('returns false when removing an unknown stream', () => {
    expect(new StreamsTracker().remove('ghost')).toBe(false);
  });
});

describe('LegacyBroker', () => {
  it('passes broadcasts through unnumbered', async () => {
    const b = new RecordingBroadcaster();
    const broker = new LegacyBroker({ broadcaster: b });
    await broker.handleBroadcast({ stream: 's', data: 'x' });
    expect(b.messages).toEqual([{ stream: 's', data: 'x' }]);
  });

  it('rejects history calls with "history not supported"', async () => {
    const broker = new LegacyBroker({ broadcaster: new RecordingBroadcaster() });
    await expect(broker.historyFrom('s', 'e', 1)).rejects.toThrow(HistoryError);
    await expect(broker.historyFrom('s', 'e', 1)).rejects.toThrow('history not supported');
    await expect(broker.historySince('s', 1)).rejects.toThrow('history not supported');
  });

  it('keeps no sessions', async () => {
    const broker = new LegacyBroker({ broadcaster: new RecordingBroadcaster() });
    await broker.commitSession('sid', { toCacheEntry: () => new Uint8Array([1]) });
    expect(await broker.restoreSession('sid')).toBeNull();
  });

  it('tracks subscriptions like any broker', async () => {
    const b = new RecordingBroadcaster();
    const broker = new LegacyBroker({ broadcaster: b });
    await broker.subscribe('s');
    await broker.subscribe('s');
    await broker.unsubscribe('s');
    await broker.unsubscribe('s');
    expect([b.subscribed, b.unsubscribed]).toEqual([['s'], ['s']]);
    expect(broker.announce()).toMatch(/not supported/);
  });
});
