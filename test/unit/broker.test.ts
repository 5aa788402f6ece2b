import { describe, expect, it } from 'vitest';
import { defaultBrokerConfig, HistoryError, LegacyBroker, StreamsTracker } from '../../lib/core';
import { MemoryBroker, MemorySessionCache } from '../../lib/testing';
import { brokerContract } from '../contract/broker';
import { RecordingBroadcaster } from '../helpers/broadcaster';

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
