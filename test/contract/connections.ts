import { beforeEach, describe, expect, it } from 'vitest';
import {
  bucketOf,
  ConfigError,
  type ConnectionChange,
  type ConnectionRecord,
  type ConnectionStore,
  type Subscription,
} from '../../lib/core';
import { shardOf, subscriberSortKey } from '../../lib/realtime/fanout/spread';

let n = 0;
const id = (label: string) => `${label}-${process.pid}-${Date.now()}-${++n}`;

function connection(connectionId: string, identity = 'user-1'): ConnectionRecord {
  return {
    connectionId,
    identity,
    sid: `sid-${connectionId}`,
    protocol: 'actioncable-v1-ext-json',
    connectedAt: 1,
  };
}

async function collect<T>(pages: AsyncIterable<T[]>): Promise<T[][]> {
  const out: T[][] = [];
  for await (const page of pages) out.push(page);
  return out;
}

/**
 * Waits past the current millisecond, so that what is written next is dated later than
 * what was written before (the stores date changes with the wall clock).
 */
async function nextPhase(): Promise<number> {
  await new Promise((r) => setTimeout(r, 20));
  return Date.now();
}

/** The changes that concern `connectionIds` (the table may hold other tests' items). */
function changesOf(changes: readonly ConnectionChange[], connectionIds: Iterable<string>) {
  const ids = new Set(connectionIds);
  return changes.filter((c) =>
    ids.has(c.kind === 'connection' ? c.connection.connectionId : c.subscription.connectionId),
  );
}

/** A change without its time, for comparing. */
function undated(c: ConnectionChange): ConnectionRecord | Subscription {
  return c.kind === 'connection' ? c.connection : c.subscription;
}

/** The ConnectionStore contract, run against memory and DynamoDB. */
export function connectionStoreContract(
  name: string,
  factory: () => Promise<ConnectionStore> | ConnectionStore,
): void {
  describe(`${name} (ConnectionStore contract)`, () => {
    let store: ConnectionStore;
    beforeEach(async () => {
      store = await factory();
    });

    it('stores and reads back a connection', async () => {
      const c = connection(id('c'));
      await store.putConnection(c);
      expect(await store.getConnection(c.connectionId)).toEqual(c);
      const chosen: ConnectionRecord = {
        ...connection(id('c')),
        endpoint: 'https://abc.execute-api.example/prod',
        refusal: 'token_expired',
        pingInterval: 7,
      };
      await store.putConnection(chosen);
      expect(await store.getConnection(chosen.connectionId)).toEqual(chosen);
      expect(await store.getConnection(id('missing'))).toBeUndefined();
    });

    it("keeps a subscription's endpoint and whisper flag, so fan-out needs no other read", async () => {
      const stream = id('stream');
      const sub: Subscription = {
        connectionId: id('c'),
        stream,
        identifier: '{"channel":"$pubsub","stream_name":"x"}',
        whisper: true,
        endpoint: 'https://abc.execute-api.example/prod',
      };
      await store.addSubscription(sub);
      expect((await collect(store.subscribersOf(stream))).flat()).toEqual([sub]);
    });

    it('lists the connections of an identity', async () => {
      const identity = id('user');
      const a = connection(id('a'), identity);
      const b = connection(id('b'), identity);
      await store.putConnection(a);
      await store.putConnection(b);
      await store.putConnection(connection(id('other'), id('someone-else')));
      const found = await store.connectionsOf(identity);
      expect(found.map((c) => c.connectionId).sort()).toEqual(
        [a.connectionId, b.connectionId].sort(),
      );
    });

    it('keeps one subscription per stream per connection, and says which add stored it', async () => {
      const c = id('c');
      const other = id('c');
      const stream = id('stream');
      expect(await store.addSubscription({ connectionId: c, stream, identifier: '{"x":1}' })).toBe(
        'added',
      );
      expect(await store.addSubscription({ connectionId: c, stream, identifier: '{"x":1}' })).toBe(
        'subscribed',
      );
      // Another identifier of the same stream: no second, paid copy of every broadcast.
      const racing = await Promise.all(
        Array.from({ length: 5 }, () =>
          store.addSubscription({ connectionId: c, stream, identifier: '{"x":2}' }),
        ),
      );
      expect(racing).toEqual(Array(5).fill('stream_taken'));
      // Concurrent adds of one new stream: exactly one stores it.
      const fresh = id('stream');
      const first = await Promise.all(
        ['{"a":1}', '{"a":2}', '{"a":3}'].map((identifier) =>
          store.addSubscription({ connectionId: c, stream: fresh, identifier }),
        ),
      );
      expect(first.filter((r) => r === 'added')).toHaveLength(1);
      expect(first.filter((r) => r === 'stream_taken')).toHaveLength(2);
      expect(
        await store.addSubscription({ connectionId: other, stream, identifier: '{"x":2}' }),
      ).toBe('added');
      expect(await store.subscriptionsOf(c)).toHaveLength(2);
      const pages = await collect(store.subscribersOf(stream));
      expect(
        pages
          .flat()
          .map((s) => s.connectionId)
          .sort(),
      ).toEqual([c, other].sort());
      expect(await store.subscriptionOf(c, stream)).toMatchObject({ identifier: '{"x":1}' });
      expect(await store.subscriptionOf(c, id('never'))).toBeUndefined();
    });

    it('refuses a subscription over the limit, also under concurrent adds, and frees a slot on removal', async () => {
      const c = connection(id('c'));
      await store.putConnection(c);
      const { connectionId } = c;
      const streams = Array.from({ length: 12 }, () => id('stream'));
      const results = await Promise.all(
        streams.map((stream) =>
          store.addSubscription({ connectionId, stream, identifier: stream }, 5),
        ),
      );
      expect(results.filter((r) => r === 'added')).toHaveLength(5);
      expect(results.filter((r) => r === 'limit')).toHaveLength(7);
      expect(await store.subscriptionsOf(connectionId)).toHaveLength(5);
      const held = (await store.subscriptionsOf(connectionId))[0]!;
      // At the limit, a repeat of a stored subscription is still told apart from a new one.
      expect(
        await store.addSubscription(
          { connectionId, stream: held.stream, identifier: held.identifier },
          5,
        ),
      ).toBe('subscribed');
      // Refused adds and repeats take no slot; a removal gives one back.
      expect(await store.removeSubscription(connectionId, held.stream, 'another identifier')).toBe(
        false,
      );
      expect(await store.removeSubscription(connectionId, held.stream, held.identifier)).toBe(true);
      const last = id('stream');
      expect(await store.addSubscription({ connectionId, stream: last, identifier: last }, 5)).toBe(
        'added',
      );
      expect(
        await store.addSubscription({ connectionId, stream: id('stream'), identifier: 'i' }, 5),
      ).toBe('limit');
      // A repeat of a held stream under another identifier at the limit is stream_taken.
      expect(
        await store.addSubscription({ connectionId, stream: last, identifier: 'other' }, 5),
      ).toBe('stream_taken');
      // A connection that is not stored gets nothing with a limit.
      expect(
        await store.addSubscription(
          { connectionId: id('unknown'), stream: last, identifier: 'i' },
          5,
        ),
      ).toBe('gone');
      // A new connection under the same id starts from none.
      await store.removeConnection(connectionId);
      await store.putConnection(c);
      expect(await store.addSubscription({ connectionId, stream: last, identifier: last }, 1)).toBe(
        'added',
      );
    });

    it("lists a stream's subscribers page by page", async () => {
      const stream = id('busy');
      const ids = Array.from({ length: 23 }, (_, i) => id(`sub${i}`));
      await Promise.all(
        ids.map((c) => store.addSubscription({ connectionId: c, stream, identifier: 'i' })),
      );
      await store.addSubscription({
        connectionId: id('elsewhere'),
        stream: id('other'),
        identifier: 'i',
      });
      const pages = await collect(store.subscribersOf(stream, 10));
      expect(pages.length).toBeGreaterThanOrEqual(3);
      expect(pages.every((p) => p.length <= 10)).toBe(true);
      expect(
        pages
          .flat()
          .map((s) => s.connectionId)
          .sort(),
      ).toEqual([...ids].sort());
    });

    it("slices a stream's subscribers by hash prefix: each in exactly one slice, in hash order", async () => {
      const stream = id('sliced');
      const ids = Array.from({ length: 40 }, (_, i) => id(`s${i}`));
      await Promise.all(
        ids.map((c) => store.addSubscription({ connectionId: c, stream, identifier: 'i' })),
      );
      const whole = await store.readSlice({ stream, shard: 0, prefix: '' }, 100);
      expect(whole.spread).toBe(1);
      expect(whole.truncated).toBe(false);
      const order = whole.subscribers.map((s) => subscriberSortKey(s.connectionId));
      expect(order).toEqual([...order].sort());
      expect(whole.subscribers.map((s) => s.connectionId).sort()).toEqual([...ids].sort());
      const bySlice = await Promise.all(
        Array.from({ length: 16 }, (_, d) =>
          store.readSlice({ stream, shard: 0, prefix: d.toString(16) }, 100),
        ),
      );
      for (const [d, read] of bySlice.entries()) {
        expect(read.spread).toBeUndefined();
        for (const s of read.subscribers) {
          expect(subscriberSortKey(s.connectionId).startsWith(d.toString(16))).toBe(true);
        }
      }
      expect(
        bySlice
          .flatMap((r) => r.subscribers)
          .map((s) => s.connectionId)
          .sort(),
      ).toEqual([...ids].sort());
      expect(await store.readSlice({ stream, shard: 1, prefix: '' }, 100)).toEqual({
        subscribers: [],
        truncated: false,
      });
    });

    it('says when a slice holds more subscribers than were asked for', async () => {
      const stream = id('truncated');
      const ids = Array.from({ length: 12 }, (_, i) => id(`t${i}`));
      await Promise.all(
        ids.map((c) => store.addSubscription({ connectionId: c, stream, identifier: 'i' })),
      );
      const read = await store.readSlice({ stream, shard: 0, prefix: '' }, 10);
      expect(read.subscribers).toHaveLength(10);
      expect(read.truncated).toBe(true);
      expect(read.spread).toBe(1);
      const exact = await store.readSlice({ stream, shard: 0, prefix: '' }, 12);
      expect(exact.truncated).toBe(false);
    });

    it('spreads new subscriptions over more shards, never fewer; earlier ones stay and are still read', async () => {
      const stream = id('spread');
      const before = Array.from({ length: 20 }, (_, i) => id(`b${i}`));
      for (const c of before)
        await store.addSubscription({ connectionId: c, stream, identifier: 'i' });
      expect(await store.spreadStream(stream, 4)).toBe(4);
      expect(await store.spreadStream(stream, 2)).toBe(4);
      await expect(store.spreadStream(stream, 3)).rejects.toThrow(ConfigError);
      const after = Array.from({ length: 40 }, (_, i) => id(`a${i}`));
      for (const c of after)
        await store.addSubscription({ connectionId: c, stream, identifier: 'i' });
      const shards = await Promise.all(
        [0, 1, 2, 3].map((shard) => store.readSlice({ stream, shard, prefix: '' }, 1000)),
      );
      expect(shards[0]!.spread).toBe(4);
      for (const [shard, read] of shards.entries()) {
        for (const s of read.subscribers) {
          if (after.includes(s.connectionId)) expect(shardOf(s.connectionId, 4)).toBe(shard);
          else expect(shard).toBe(0);
        }
      }
      const all = [...before, ...after].sort();
      expect(
        shards
          .flatMap((r) => r.subscribers)
          .map((s) => s.connectionId)
          .sort(),
      ).toEqual(all);
      expect(
        (await collect(store.subscribersOf(stream, 7)))
          .flat()
          .map((s) => s.connectionId)
          .sort(),
      ).toEqual(all);
    });

    it('removes one subscription and ignores unknown ones', async () => {
      const c = id('c');
      const s1 = id('s1');
      const s2 = id('s2');
      await store.addSubscription({ connectionId: c, stream: s1, identifier: 'a' });
      await store.addSubscription({ connectionId: c, stream: s2, identifier: 'b', whisper: true });
      await store.removeSubscription(c, s1, 'a');
      await store.removeSubscription(c, id('never'), 'z');
      expect(await store.subscriptionsOf(c)).toEqual([
        { connectionId: c, stream: s2, identifier: 'b', whisper: true },
      ]);
    });

    describe('changesSince', () => {
      it('reads every connection and subscription with 0, each once, in pages that are never empty', async () => {
        const before = Date.now();
        const mine = Array.from({ length: 23 }, (_, i) => connection(id(`all${i}`)));
        await Promise.all(mine.map((c) => store.putConnection(c)));
        const subs: Subscription[] = mine.slice(0, 4).map((c, i) => ({
          connectionId: c.connectionId,
          stream: id('stream'),
          identifier: `{"i":${i}}`,
          whisper: i % 2 === 0,
          endpoint: 'https://abc.execute-api.example/prod',
        }));
        await Promise.all(subs.map((sub) => store.addSubscription(sub)));
        const removed = connection(id('gone'));
        await store.putConnection(removed);
        await store.addSubscription({
          connectionId: removed.connectionId,
          stream: id('stream'),
          identifier: 'i',
        });
        await store.removeConnection(removed.connectionId);
        const pages = await collect(store.changesSince(0, 10));
        expect(pages.every((p) => p.length > 0 && p.length <= 10)).toBe(true);
        const all = pages.flat();
        const ours = changesOf(
          all,
          [...mine, removed].map((c) => c.connectionId),
        );
        expect(ours.filter((c) => c.kind === 'connection').map(undated)).toEqual(
          expect.arrayContaining(mine),
        );
        expect(ours.filter((c) => c.kind === 'subscription').map(undated)).toEqual(
          expect.arrayContaining(subs),
        );
        expect(ours).toHaveLength(mine.length + subs.length);
        expect(ours.every((c) => c.changedAt >= before && c.changedAt <= Date.now())).toBe(true);
        const keys = all.map((c) =>
          c.kind === 'connection'
            ? `c ${c.connection.connectionId}`
            : `s ${c.subscription.connectionId} ${c.subscription.stream} ${c.subscription.identifier}`,
        );
        expect(new Set(keys).size).toBe(keys.length);
      });

      it('reads only what was stored or changed at the given time or later', async () => {
        const old = connection(id('old'));
        await store.putConnection(old);
        await store.addSubscription({
          connectionId: old.connectionId,
          stream: id('s'),
          identifier: 'i',
        });
        const since = await nextPhase();
        const fresh = connection(id('fresh'));
        await store.putConnection(fresh);
        const sub: Subscription = {
          connectionId: old.connectionId,
          stream: id('s'),
          identifier: 'j',
          whisper: false,
        };
        await store.addSubscription(sub);
        const changes = changesOf((await collect(store.changesSince(since))).flat(), [
          old.connectionId,
          fresh.connectionId,
        ]);
        expect(changes.map(undated)).toEqual(expect.arrayContaining([fresh, sub]));
        expect(changes).toHaveLength(2);
        expect(changes.every((c) => c.changedAt >= since)).toBe(true);
        expect(
          changesOf((await collect(store.changesSince(Date.now() + 60_000))).flat(), [
            old.connectionId,
            fresh.connectionId,
          ]),
        ).toEqual([]);
      });

      it('reads only the given buckets: a connection and its subscriptions sit in bucketOf(id, 8)', async () => {
        const mine = Array.from({ length: 40 }, (_, i) => connection(id(`bucket${i}`)));
        await Promise.all(mine.map((c) => store.putConnection(c)));
        const subs: Subscription[] = mine.map((c) => ({
          connectionId: c.connectionId,
          stream: id('s'),
          identifier: 'i',
        }));
        await Promise.all(subs.map((sub) => store.addSubscription(sub)));
        const ids = mine.map((c) => c.connectionId);
        const read = async (buckets?: number[]) =>
          changesOf((await collect(store.changesSince(0, 7, buckets))).flat(), ids);
        const idOf = (c: ConnectionChange) =>
          c.kind === 'connection' ? c.connection.connectionId : c.subscription.connectionId;
        const low = await read([0, 1, 2]);
        const high = await read([3, 4, 5, 6, 7]);
        expect(low.every((c) => bucketOf(idOf(c), 8) <= 2)).toBe(true);
        expect(high.every((c) => bucketOf(idOf(c), 8) > 2)).toBe(true);
        // Together, every item once, as a read of every bucket gives it.
        expect(low.length + high.length).toBe(2 * mine.length);
        expect((await read()).length).toBe(2 * mine.length);
        expect(await read([])).toEqual([]);
      });

      it('reports a connection again when one of its subscriptions is removed', async () => {
        const c = connection(id('c'));
        const untouched = connection(id('untouched'));
        await store.putConnection(c);
        await store.putConnection(untouched);
        const removed: Subscription = {
          connectionId: c.connectionId,
          stream: id('s1'),
          identifier: 'a',
        };
        const kept: Subscription = {
          connectionId: c.connectionId,
          stream: id('s2'),
          identifier: 'b',
          whisper: true,
        };
        // A subscription whose connection is not stored (or no longer).
        const orphan: Subscription = {
          connectionId: id('orphan'),
          stream: id('s3'),
          identifier: 'o',
        };
        for (const s of [removed, kept, orphan]) await store.addSubscription(s);
        const since = await nextPhase();
        await store.removeSubscription(c.connectionId, removed.stream, removed.identifier);
        await store.removeSubscription(untouched.connectionId, id('never'), 'z');
        await store.removeSubscription(orphan.connectionId, orphan.stream, orphan.identifier);
        const changes = changesOf((await collect(store.changesSince(since))).flat(), [
          c.connectionId,
          untouched.connectionId,
          orphan.connectionId,
        ]);
        expect(changes.map(undated)).toEqual([c]);
        expect(changes[0]!.changedAt).toBeGreaterThanOrEqual(since);
        // Marking a connection changed never stores one.
        expect(await store.getConnection(orphan.connectionId)).toBeUndefined();
        expect(await store.subscriptionsOf(c.connectionId)).toEqual([kept]);
      });
    });

    it('removes a connection with all its subscriptions', async () => {
      const c = connection(id('c'));
      const stream = id('stream');
      await store.putConnection(c);
      const streams = Array.from({ length: 30 }, (_, i) => `${stream}-${i}`);
      for (const s of streams)
        await store.addSubscription({ connectionId: c.connectionId, stream: s, identifier: 'i' });
      const removed = await store.removeConnection(c.connectionId);
      expect(removed.map((s) => s.stream).sort()).toEqual([...streams].sort());
      expect(await store.getConnection(c.connectionId)).toBeUndefined();
      expect(await store.subscriptionsOf(c.connectionId)).toEqual([]);
      expect((await collect(store.subscribersOf(streams[0]!))).flat()).toEqual([]);
    });
  });
}
