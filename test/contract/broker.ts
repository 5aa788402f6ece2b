import { beforeEach, describe, expect, it } from 'vitest';
import { type Broker, type BrokerConfig, HistoryError, type StreamMessage } from '../../lib/core';
import { RecordingBroadcaster } from '../helpers/broadcaster';
import { FakeClock } from '../helpers/clock';

/** What a broker factory receives. */
export interface BrokerFactoryOptions {
  broadcaster: RecordingBroadcaster;
  config: Partial<BrokerConfig>;
  clock: FakeClock;
  /** `BrokerOptions.streamMetaTtl`, when the test sets one. */
  streamMetaTtl?: number;
}

/** Builds a fresh broker; `streamPrefix` keeps tests apart on shared tables. */
export type BrokerFactory = (options: BrokerFactoryOptions) => Promise<Broker> | Broker;

let unique = 0;
/** A stream name no other test uses. */
function streamName(label: string): string {
  unique++;
  return `${label}/${process.pid}-${Date.now()}-${unique}`;
}

function payloads(messages: readonly StreamMessage[]): string[] {
  return messages.map((m) => m.data);
}

/**
 * The Broker contract: every history-keeping broker (memory, DynamoDB) passes it
 * unchanged. Time is a {@link FakeClock}.
 */
export function brokerContract(name: string, factory: BrokerFactory): void {
  describe(`${name} (Broker contract)`, () => {
    let clock: FakeClock;
    let broadcaster: RecordingBroadcaster;
    let broker: Broker;

    async function make(
      config: Partial<BrokerConfig> = {},
      streamMetaTtl?: number,
    ): Promise<Broker> {
      broker = await factory({
        broadcaster,
        config,
        clock,
        ...(streamMetaTtl === undefined ? {} : { streamMetaTtl }),
      });
      await broker.start();
      return broker;
    }

    async function publish(stream: string, ...data: string[]): Promise<void> {
      for (const d of data) {
        await broker.handleBroadcast({ stream, data: d });
        clock.advance(1000);
      }
    }

    function epochOf(stream: string): string {
      const msg = broadcaster.messages.find((m) => m.stream === stream && m.epoch);
      if (!msg?.epoch) throw new Error(`no epoch seen for ${stream}`);
      return msg.epoch;
    }

    beforeEach(async () => {
      clock = new FakeClock();
      broadcaster = new RecordingBroadcaster();
      await make();
    });

    describe('handleBroadcast', () => {
      it('numbers messages from 1 with one epoch per stream and broadcasts them', async () => {
        const s = streamName('numbers');
        await publish(s, 'a', 'b', 'c');
        expect(broadcaster.messages.map((m) => m.offset)).toEqual([1, 2, 3]);
        const epochs = new Set(broadcaster.messages.map((m) => m.epoch));
        expect(epochs.size).toBe(1);
        expect([...epochs][0]).toMatch(/.+/);
        expect(payloads(broadcaster.messages)).toEqual(['a', 'b', 'c']);
      });

      it('stores a message with a source position once; a redelivery of the last one is broadcast again with its offset', async () => {
        const s = streamName('redelivered');
        const send = (data: string, sourceOffset: string) =>
          broker.handleBroadcast({ stream: s, data, meta: { sourceOffset } });
        await send('a', '100000000000000000001');
        await send('a', '100000000000000000001'); // the consumer crashed before its ack
        await send('b', '100000000000000000002');
        await send('a', '100000000000000000001'); // older than the last: already delivered
        await send('c', '200000000000000000000');
        // Older than the last and never appended: dead-lettered, now redriven. It is
        // appended once, at the end, and the stream's position does not go back.
        await send('x', '150000000000000000000');
        await send('x', '150000000000000000000');
        await send('d', '200000000000000000001');
        expect(broadcaster.messages.map((m) => [m.data, m.offset])).toEqual([
          ['a', 1],
          ['a', 1],
          ['b', 2],
          ['c', 3],
          ['x', 4],
          ['d', 5],
        ]);
        expect(payloads(await broker.historyFrom(s, epochOf(s), 0))).toEqual([
          'a',
          'b',
          'c',
          'x',
          'd',
        ]);
        await expect(send('d', 'not-a-number')).rejects.toThrow(/decimal string/);
      });

      it('keeps source positions of 40 digits (stream sequence numbers can be longer than a DynamoDB number)', async () => {
        const s = streamName('long-source');
        const first = `1${'0'.repeat(39)}`;
        const second = `1${'0'.repeat(38)}1`;
        const older = `9${'9'.repeat(38)}`;
        const send = (data: string, sourceOffset: string) =>
          broker.handleBroadcast({ stream: s, data, meta: { sourceOffset } });
        await send('a', first);
        await send('b', second);
        await send('b', second); // a redelivery of the last
        await send('a', first); // older than the last and retained: a duplicate
        await send('x', older); // older, never appended: appended at the end
        await send('x', older);
        expect(broadcaster.messages.map((m) => [m.data, m.offset])).toEqual([
          ['a', 1],
          ['b', 2],
          ['b', 2],
          ['x', 3],
        ]);
      });

      it('gives every stream its own sequence', async () => {
        const s1 = streamName('one');
        const s2 = streamName('two');
        await publish(s1, 'a');
        await publish(s2, 'x');
        await publish(s1, 'b');
        expect(broadcaster.messages.map((m) => [m.stream, m.offset])).toEqual([
          [s1, 1],
          [s2, 1],
          [s1, 2],
        ]);
      });

      it('broadcasts transient messages without storing or numbering them', async () => {
        const s = streamName('transient');
        await publish(s, 'kept');
        await broker.handleBroadcast({ stream: s, data: 'typing', meta: { transient: true } });
        const transient = broadcaster.messages[1]!;
        expect(transient.data).toBe('typing');
        expect(transient.offset).toBeUndefined();
        expect(transient.epoch).toBeUndefined();
        expect(payloads(await broker.historyFrom(s, epochOf(s), 0))).toEqual(['kept']);
        await publish(s, 'next');
        expect(broadcaster.messages[2]!.offset).toBe(2);
      });
    });

    describe('lastBroadcastAt', () => {
      const lastBroadcastAt = (streams: readonly string[]) => {
        if (!broker.lastBroadcastAt) throw new Error(`${name} has no lastBroadcastAt`);
        return broker.lastBroadcastAt(streams);
      };

      it('tells when each stream last had a message appended and leaves out the others', async () => {
        const a = streamName('active-a');
        const b = streamName('active-b');
        const never = streamName('never');
        await broker.handleBroadcast({ stream: a, data: 'first' });
        clock.advance(2000);
        const atA = clock.now();
        await broker.handleBroadcast({ stream: a, data: 'second' });
        clock.advance(3000);
        const atB = clock.now();
        await broker.handleBroadcast({ stream: b, data: 'x', meta: { sourceOffset: '100' } });
        clock.advance(4000);
        await broker.handleBroadcast({ stream: a, data: 'typing', meta: { transient: true } });
        await broker.handleBroadcast({ stream: never, data: 'typing', meta: { transient: true } });
        expect(await lastBroadcastAt([a, b, never, a])).toEqual(
          new Map([
            [a, atA],
            [b, atB],
          ]),
        );
        expect(await lastBroadcastAt([])).toEqual(new Map());
      });

      it('answers for more streams than one request reads', async () => {
        const streams = Array.from({ length: 120 }, (_, i) => streamName(`many-${i}`));
        const expected = new Map<string, number>();
        for (const [i, s] of streams.entries()) {
          if (i % 20 !== 0) continue;
          expected.set(s, clock.now());
          await publish(s, 'm');
        }
        expect(await lastBroadcastAt(streams)).toEqual(expected);
      });
    });

    describe('historyFrom', () => {
      it('returns the messages after the offset, in order', async () => {
        const s = streamName('from');
        await publish(s, 'a', 'b', 'c');
        const history = await broker.historyFrom(s, epochOf(s), 1);
        expect(payloads(history)).toEqual(['b', 'c']);
        expect(history.map((m) => m.offset)).toEqual([2, 3]);
        expect(history.every((m) => m.epoch === epochOf(s) && m.stream === s)).toBe(true);
      });

      it('serves what the limit retains and throws for a position before it', async () => {
        const s = streamName('limit');
        await make({ historyLimit: 2 });
        await publish(s, 'm1', 'm2', 'm3');
        expect(payloads(await broker.historyFrom(s, epochOf(s), 1))).toEqual(['m2', 'm3']);
        await expect(broker.historyFrom(s, epochOf(s), 0)).rejects.toThrow(HistoryError);
      });

      it('returns [] at the latest offset', async () => {
        const s = streamName('latest');
        await publish(s, 'a', 'b');
        expect(await broker.historyFrom(s, epochOf(s), 2)).toEqual([]);
      });

      it('returns [] at the latest offset after every message expired', async () => {
        const s = streamName('expired-latest');
        await make({ historyTtl: 60 });
        await publish(s, 'a', 'b');
        clock.advanceSeconds(3600);
        expect(await broker.historyFrom(s, epochOf(s), 2)).toEqual([]);
      });

      it('throws for a position whose next messages expired', async () => {
        const s = streamName('expired-gap');
        await make({ historyTtl: 60 });
        await publish(s, 'a', 'b');
        clock.advanceSeconds(3600);
        await expect(broker.historyFrom(s, epochOf(s), 1)).rejects.toThrow(/no longer retained/);
      });

      it('never returns an expired message', async () => {
        const s = streamName('partly-expired');
        await make({ historyTtl: 10 });
        await publish(s, 'old');
        clock.advanceSeconds(20);
        await publish(s, 'new');
        expect(payloads(await broker.historyFrom(s, epochOf(s), 1))).toEqual(['new']);
        await expect(broker.historyFrom(s, epochOf(s), 0)).rejects.toThrow(HistoryError);
      });

      it('throws HistoryError naming both epochs for an unknown epoch', async () => {
        const s = streamName('epoch');
        await publish(s, 'a');
        const current = epochOf(s);
        const error = await broker.historyFrom(s, 'bogus', 0).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(HistoryError);
        expect((error as Error).message).toContain('bogus');
        expect((error as Error).message).toContain(current);
      });

      it('throws HistoryError for a stream that has no history', async () => {
        await expect(broker.historyFrom(streamName('none'), 'e', 0)).rejects.toThrow(HistoryError);
      });

      it('keeps the epoch and last offset after every message expired', async () => {
        const s = streamName('keeps');
        await make({ historyTtl: 10 });
        await publish(s, 'a', 'b');
        const epoch = epochOf(s);
        clock.advanceSeconds(60);
        await publish(s, 'c');
        const last = broadcaster.messages[broadcaster.messages.length - 1]!;
        expect(last.epoch).toBe(epoch);
        expect(last.offset).toBe(3);
        expect(payloads(await broker.historyFrom(s, epoch, 2))).toEqual(['c']);
      });

      it('forgets a stream whose meta expired: the old epoch is unknown, the next message starts a new epoch at offset 1', async () => {
        const s = streamName('forgotten');
        await make({ historyTtl: 10 }, 60);
        await publish(s, 'a', 'b');
        const old = epochOf(s);
        clock.advanceSeconds(61);
        await expect(broker.historyFrom(s, old, 2)).rejects.toThrow(HistoryError);
        expect(await broker.historySince(s, 0)).toEqual([]);
        expect((await broker.lastBroadcastAt?.([s]))?.has(s) ?? false).toBe(false);
        await publish(s, 'c');
        const last = broadcaster.messages[broadcaster.messages.length - 1]!;
        expect(last.offset).toBe(1);
        expect(last.epoch).not.toBe(old);
        expect(payloads(await broker.historyFrom(s, last.epoch!, 0))).toEqual(['c']);
        await expect(broker.historyFrom(s, old, 2)).rejects.toThrow(/unknown epoch/);
      });

      it('forgets a stream whose meta expired also for a message with a source position', async () => {
        const s = streamName('forgotten-source');
        await make({ historyTtl: 10 }, 60);
        await broker.handleBroadcast({ stream: s, data: 'a', meta: { sourceOffset: '100' } });
        const old = epochOf(s);
        clock.advanceSeconds(61);
        await broker.handleBroadcast({ stream: s, data: 'b', meta: { sourceOffset: '200' } });
        const last = broadcaster.messages[broadcaster.messages.length - 1]!;
        expect([last.offset, last.epoch === old]).toEqual([1, false]);
      });

      it('keeps the meta at least as long as the messages, whatever streamMetaTtl says', async () => {
        const s = streamName('meta-outlives');
        await make({ historyTtl: 120 }, 5);
        await publish(s, 'a', 'b');
        clock.advanceSeconds(60);
        expect(payloads(await broker.historyFrom(s, epochOf(s), 1))).toEqual(['b']);
      });
    });

    describe('historySince', () => {
      it('returns retained messages with a timestamp at or after the given second', async () => {
        const s = streamName('since');
        const start = clock.now() / 1000;
        await publish(s, 'a', 'b', 'c');
        expect(payloads(await broker.historySince(s, start + 1))).toEqual(['b', 'c']);
        expect(payloads(await broker.historySince(s, start))).toEqual(['a', 'b', 'c']);
        const history = await broker.historySince(s, start + 2);
        expect(history.map((m) => m.offset)).toEqual([3]);
        expect(history[0]!.epoch).toBe(epochOf(s));
      });

      it('leaves out expired messages', async () => {
        const s = streamName('since-expired');
        await make({ historyTtl: 10 });
        const start = clock.now() / 1000;
        await publish(s, 'a');
        clock.advanceSeconds(30);
        await publish(s, 'b');
        expect(payloads(await broker.historySince(s, start))).toEqual(['b']);
      });

      it('returns [] for an unknown stream', async () => {
        expect(await broker.historySince(streamName('unknown'), 0)).toEqual([]);
      });
    });

    describe('subscriptions', () => {
      it('subscribes the broadcaster on the first subscriber and unsubscribes on the last', async () => {
        const s = streamName('subs');
        expect(await broker.subscribe(s)).toBe(s);
        await broker.subscribe(s);
        expect(broadcaster.subscribed).toEqual([s]);
        expect(await broker.unsubscribe(s)).toBe(s);
        expect(broadcaster.unsubscribed).toEqual([]);
        await broker.unsubscribe(s);
        expect(broadcaster.unsubscribed).toEqual([s]);
      });

      it('passes remote commands to the broadcaster', async () => {
        await broker.handleCommand({ command: 'disconnect', payload: { identifier: 'u1' } });
        expect(broadcaster.commands).toEqual([
          { command: 'disconnect', payload: { identifier: 'u1' } },
        ]);
      });
    });

    describe('sessions', () => {
      const session = (text: string) => ({ toCacheEntry: () => new TextEncoder().encode(text) });
      const decode = (bytes: Uint8Array | null) => (bytes ? new TextDecoder().decode(bytes) : null);

      it('restores a committed session', async () => {
        const sid = streamName('sid');
        await broker.commitSession(sid, session('state-1'));
        expect(decode(await broker.restoreSession(sid))).toBe('state-1');
      });

      it('returns null for an unknown session', async () => {
        expect(await broker.restoreSession(streamName('nobody'))).toBeNull();
      });

      it('expires a session sessionsTtl seconds after finishSession', async () => {
        const sid = streamName('sid');
        await make({ sessionsTtl: 60 });
        await broker.commitSession(sid, {
          toCacheEntry: async () => new TextEncoder().encode('async'),
        });
        await broker.finishSession(sid);
        clock.advanceSeconds(59);
        expect(decode(await broker.restoreSession(sid))).toBe('async');
        clock.advanceSeconds(2);
        expect(await broker.restoreSession(sid)).toBeNull();
      });

      it('keeps a session alive when it is committed again', async () => {
        const sid = streamName('sid');
        await make({ sessionsTtl: 60 });
        await broker.commitSession(sid, session('v1'));
        await broker.finishSession(sid);
        clock.advanceSeconds(50);
        await broker.commitSession(sid, session('v2'));
        clock.advanceSeconds(50);
        expect(decode(await broker.restoreSession(sid))).toBe('v2');
      });

      describe('updateSession', () => {
        const update = async (
          sid: string,
          fn: (current: string | null) => Promise<string | undefined> | string | undefined,
        ) => {
          if (!broker.updateSession) throw new Error(`${name} has no updateSession`);
          return broker.updateSession(sid, async (bytes) => {
            const next = await fn(decode(bytes));
            return next === undefined ? undefined : session(next);
          });
        };

        it('passes the stored session (null when unknown) and writes what the update returns', async () => {
          const sid = streamName('sid');
          const seen: (string | null)[] = [];
          expect(
            await update(sid, (c) => {
              seen.push(c);
              return 'v1';
            }),
          ).toBe(true);
          expect(
            await update(sid, (c) => {
              seen.push(c);
              return `${c}+v2`;
            }),
          ).toBe(true);
          expect(seen).toEqual([null, 'v1']);
          expect(decode(await broker.restoreSession(sid))).toBe('v1+v2');
        });

        it('writes nothing when the update returns undefined', async () => {
          const sid = streamName('sid');
          await broker.commitSession(sid, session('kept'));
          expect(await update(sid, () => undefined)).toBe(false);
          expect(decode(await broker.restoreSession(sid))).toBe('kept');
        });

        it('loses no write of concurrent updates: each one that read a stale session runs again', async () => {
          const sid = streamName('sid');
          await broker.commitSession(sid, session(''));
          const writers = ['a', 'b', 'c', 'd', 'e'];
          let firstReads = 0;
          let allRead!: () => void;
          const everyoneRead = new Promise<void>((r) => {
            allRead = r;
          });
          const first = new Set<string>();
          await Promise.all(
            writers.map((w) =>
              update(sid, async (current) => {
                if (!first.has(w)) {
                  // Every writer reads the same version before any of them writes.
                  first.add(w);
                  if (++firstReads === writers.length) allRead();
                  await everyoneRead;
                }
                return `${current}${w}`;
              }),
            ),
          );
          const final = decode(await broker.restoreSession(sid));
          expect([...(final ?? '')].sort()).toEqual(writers);
        });

        it('runs again when a commitSession landed between its read and its write', async () => {
          const sid = streamName('sid');
          await broker.commitSession(sid, session('v1'));
          const seen: (string | null)[] = [];
          await update(sid, async (current) => {
            seen.push(current);
            if (seen.length === 1) await broker.commitSession(sid, session('other'));
            return `${current}+mine`;
          });
          expect(seen).toEqual(['v1', 'other']);
          expect(decode(await broker.restoreSession(sid))).toBe('other+mine');
        });

        it('keeps a finished session alive, like commitSession', async () => {
          const sid = streamName('sid');
          await make({ sessionsTtl: 60 });
          await broker.commitSession(sid, session('v1'));
          await broker.finishSession(sid);
          clock.advanceSeconds(50);
          await update(sid, () => 'v2');
          clock.advanceSeconds(50);
          expect(decode(await broker.restoreSession(sid))).toBe('v2');
        });

        it('treats an expired session as unknown', async () => {
          const sid = streamName('sid');
          await make({ sessionsTtl: 60 });
          await broker.commitSession(sid, session('old'));
          await broker.finishSession(sid);
          clock.advanceSeconds(61);
          const seen: (string | null)[] = [];
          await update(sid, (c) => {
            seen.push(c);
            return 'new';
          });
          expect(seen).toEqual([null]);
          expect(decode(await broker.restoreSession(sid))).toBe('new');
        });
      });

      it('keeps an unfinished session beyond sessionsTtl', async () => {
        const sid = streamName('sid');
        await make({ sessionsTtl: 60 });
        await broker.commitSession(sid, session('live'));
        clock.advanceSeconds(600);
        expect(decode(await broker.restoreSession(sid))).toBe('live');
      });
    });

    it('announces its kind and limits', async () => {
      await make({ historyLimit: 7, historyTtl: 11, sessionsTtl: 13 });
      const text = broker.announce();
      expect(text).toMatch(/limit: 7/);
      expect(text).toMatch(/history ttl: 11s/);
      expect(text).toMatch(/sessions ttl: 13s/);
    });
  });
}
