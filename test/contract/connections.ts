import { beforeEach, describe, expect, it } from 'vitest';
import type { ConnectionRecord, ConnectionStore, Subscription } from '../../lib';

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

async function collect(pages: AsyncIterable<Subscription[]>): Promise<Subscription[][]> {
  const out: Subscription[][] = [];
  for await (const page of pages) out.push(page);
  return out;
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

    it('keeps one subscription when the same one is added twice, and says which add stored it', async () => {
      const c = id('c');
      const stream = id('stream');
      expect(await store.addSubscription({ connectionId: c, stream, identifier: '{"x":1}' })).toBe(
        true,
      );
      expect(await store.addSubscription({ connectionId: c, stream, identifier: '{"x":1}' })).toBe(
        false,
      );
      const racing = await Promise.all(
        Array.from({ length: 5 }, () =>
          store.addSubscription({ connectionId: c, stream, identifier: '{"x":2}' }),
        ),
      );
      expect(racing.filter(Boolean)).toHaveLength(1);
      expect(await store.subscriptionsOf(c)).toHaveLength(2);
      const pages = await collect(store.subscribersOf(stream));
      expect(pages.flat().map((s) => s.connectionId)).toEqual([c, c]);
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

    it('lists every connection page by page, each once, without subscriptions', async () => {
      const mine = Array.from({ length: 23 }, (_, i) => connection(id(`all${i}`)));
      await Promise.all(mine.map((c) => store.putConnection(c)));
      await store.addSubscription({
        connectionId: mine[0]!.connectionId,
        stream: id('stream'),
        identifier: 'i',
      });
      const removed = connection(id('gone'));
      await store.putConnection(removed);
      await store.removeConnection(removed.connectionId);
      const pages: ConnectionRecord[][] = [];
      for await (const page of store.allConnections(10)) pages.push(page);
      expect(pages.every((p) => p.length > 0 && p.length <= 10)).toBe(true);
      const seen = pages.flat().map((c) => c.connectionId);
      // The table may hold other tests' connections: only ours are asserted.
      const ours = new Set(mine.map((c) => c.connectionId));
      expect(seen.filter((c) => ours.has(c)).sort()).toEqual([...ours].sort());
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).not.toContain(removed.connectionId);
      expect(pages.flat().find((c) => c.connectionId === mine[5]!.connectionId)).toEqual(mine[5]);
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
