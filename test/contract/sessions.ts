import { describe, expect, it } from 'vitest';
import {
  type Broadcaster,
  type Broker,
  type ConnectionApi,
  type ConnectionStore,
  composeRealtime,
  createConnectToken,
  defaultGatewayConfig,
  type RevocationStore,
  type SessionCache,
} from '../../lib/core';
import { Session } from '../../lib/realtime/session';
import { MemoryConnectionApi } from '../../lib/testing';
import { FakeClock } from '../helpers/clock';

const EXT = 'actioncable-v1-ext-json';
const JWT_SECRET = 'jwt-secret';

/**
 * The connection store, the session cache, the revocations and (given its broadcaster and
 * that cache) the broker.
 */
export type SessionStoresFactory = (options: { clock: FakeClock }) => Promise<{
  store: ConnectionStore;
  sessions: SessionCache;
  revocations: RevocationStore;
  /** A broker over `broadcaster`, keeping its sessions in `sessions`. */
  broker: (broadcaster: Broadcaster, sessions: SessionCache) => Broker;
}>;

let unique = 0;
/** An id no other test uses (the tables are shared). */
function uniqueId(label: string): string {
  unique++;
  return `${label}-${process.pid}-${Date.now()}-${unique}`;
}

/**
 * Sessions of connections: what a connection held at its end is what a reconnect restores,
 * under concurrent frames and welcome calls, less what remote commands revoked since. Run
 * against memory in unit tests and against DynamoDB Local in integration tests.
 */
export function gatewaySessionContract(name: string, factory: SessionStoresFactory): void {
  describe(`${name} (Gateway sessions under concurrency)`, () => {
    async function setup(api: ConnectionApi = new MemoryConnectionApi()) {
      const clock = new FakeClock();
      const stores = await factory({ clock });
      const { sessions, revocations, store } = stores;
      const sids: string[] = [];
      const { broker, gateway } = composeRealtime(
        {
          store,
          api,
          sessions,
          revocations,
          clock,
          config: {
            ...defaultGatewayConfig(),
            jwtSecret: JWT_SECRET,
            publicStreams: true,
            publicStreamPrefix: '',
          },
          newSid: () => {
            const sid = uniqueId('sid');
            sids.push(sid);
            return sid;
          },
        },
        stores.broker,
      );
      async function connect(
        connectionId: string,
        query: Record<string, string> = {},
        sub = 'alice',
      ) {
        const jid = await createConnectToken({ sub, ttlSeconds: 600 }, JWT_SECRET, clock);
        await gateway.connect({ connectionId, query: { jid, ...query }, protocols: EXT });
      }
      const subscribe = (connectionId: string, stream: string) =>
        gateway.receive(
          connectionId,
          JSON.stringify({ command: 'subscribe', identifier: pubsub(stream) }),
        );
      const stored = async (sid: string) => Session.decode(await broker.restoreSession(sid));
      const restored = async (connectionId: string) =>
        (await store.subscriptionsOf(connectionId)).map((s) => s.stream).sort();
      return {
        clock,
        store,
        broker,
        gateway,
        revocations,
        sids,
        connect,
        subscribe,
        stored,
        restored,
      };
    }

    const pubsub = (stream: string) => JSON.stringify({ channel: '$pubsub', stream_name: stream });

    it('stores what a connection held at its end, however its subscribes ran, and restores it', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      await t.connect(c);
      await t.gateway.welcome(c);
      const streams = Array.from({ length: 8 }, (_, i) => `s${i}`);
      await Promise.all(streams.map((s) => t.subscribe(c, s)));
      await t.gateway.receive(
        c,
        JSON.stringify({ command: 'unsubscribe', identifier: pubsub('s3') }),
      );
      // Subscribes do not write the session: it still holds what it held at connect.
      expect((await t.stored(t.sids[0]!))?.subscriptions).toEqual([]);
      await t.gateway.disconnect(c);
      const session = await t.stored(t.sids[0]!);
      const held = streams.filter((s) => s !== 's3');
      expect(session?.subscriptions.map((s) => s.stream).sort()).toEqual(held);
      expect(session?.welcomed).toBe(true);

      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! });
      expect(await t.restored(next)).toEqual(held);
    });

    it('keeps the restored subscriptions in the session when the welcome is claimed', async () => {
      const t = await setup();
      const old = uniqueId('conn');
      await t.connect(old);
      await t.subscribe(old, 'a');
      await t.gateway.disconnect(old);
      const c = uniqueId('conn');
      await t.connect(c, { sid: t.sids[0]! });
      expect(await t.gateway.welcome(c)).toBe(true);
      const session = await t.stored(t.sids[1]!);
      expect(session).toMatchObject({ welcomed: true });
      expect(session?.subscriptions.map((s) => s.stream)).toEqual(['a']);
    });

    it('does not restore a stream unsubscribed remotely after the session stored it', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      const gone = uniqueId('stream');
      const kept = uniqueId('stream');
      await t.connect(c);
      await t.subscribe(c, gone);
      await t.subscribe(c, kept);
      await t.gateway.disconnect(c);
      await t.broker.handleCommand({ command: 'unsubscribe', payload: { stream: gone } });
      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! });
      expect(await t.restored(next)).toEqual([kept]);
    });

    it('does not restore a subscription made before a remote unsubscribe whose live removal missed it', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      const missed = uniqueId('stream');
      await t.connect(c);
      await t.subscribe(c, missed);
      // The command's removal did not reach this subscription (it raced the command's read of
      // the stream's subscribers): only the revocation was recorded.
      await t.revocations.revoke({ kind: 'stream', name: missed }, Date.now());
      await new Promise((r) => setTimeout(r, 5));
      await t.gateway.disconnect(c); // the session is written after the revocation
      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! });
      expect(await t.restored(next)).toEqual([]);
    });

    it('restores a stream subscribed again after its remote unsubscribe', async () => {
      const t = await setup();
      const stream = uniqueId('stream');
      await t.broker.handleCommand({ command: 'unsubscribe', payload: { stream } });
      await new Promise((r) => setTimeout(r, 5)); // a later millisecond than the revocation
      const c = uniqueId('conn');
      await t.connect(c);
      await t.subscribe(c, stream);
      await t.gateway.disconnect(c);
      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! });
      expect(await t.restored(next)).toEqual([stream]);
    });

    /** c1 of `first` on `room` and `kept`, c2 of `second` on `room`: their sessions are sids 0 and 1. */
    async function twoOnRoom(t: Awaited<ReturnType<typeof setup>>, first: string, second: string) {
      const room = uniqueId('stream');
      const kept = uniqueId('stream');
      const [c1, c2] = [uniqueId('conn'), uniqueId('conn')];
      await t.connect(c1, {}, first);
      await t.subscribe(c1, room);
      await t.subscribe(c1, kept);
      await t.connect(c2, {}, second);
      await t.subscribe(c2, room);
      /** What new connections restoring c1's and c2's sessions hold. */
      const restoreBoth = async () => {
        const [next1, next2] = [uniqueId('conn'), uniqueId('conn')];
        await t.connect(next1, { sid: t.sids[0]! }, first);
        await t.connect(next2, { sid: t.sids[1]! }, second);
        return [await t.restored(next1), await t.restored(next2)];
      };
      return { room, kept, c1, c2, restoreBoth };
    }

    it("does not restore an identity's subscription to a stream unsubscribed for that identity alone", async () => {
      const t = await setup();
      const who = uniqueId('user');
      const { room, kept, c1, c2, restoreBoth } = await twoOnRoom(t, who, uniqueId('user'));
      await t.gateway.disconnect(c1);
      await t.gateway.disconnect(c2);
      await t.broker.handleCommand({
        command: 'unsubscribe',
        payload: { stream: room, identity: who },
      });
      expect(await restoreBoth()).toEqual([[kept], [room]]);
    });

    it("does not restore a connection's subscription to a stream unsubscribed for that connection alone", async () => {
      const t = await setup();
      const who = uniqueId('user');
      const { room, kept, c1, c2, restoreBoth } = await twoOnRoom(t, who, who);
      const [held] = (await t.store.subscriptionsOf(c1)).filter((s) => s.stream === room);
      await t.broker.handleCommand({
        command: 'unsubscribe',
        payload: { stream: room, connectionId: c1 },
      });
      expect(await t.restored(c1)).toEqual([kept]);
      expect(await t.restored(c2)).toEqual([room]);
      // A `$disconnect` that read c1's subscriptions before the removal stores them all: only
      // the revocation (for c1's session and this stream) keeps the restore from them.
      await t.store.addSubscription(held!);
      await t.gateway.disconnect(c1);
      await t.gateway.disconnect(c2);
      expect((await t.stored(t.sids[0]!))?.subscriptions.map((s) => s.stream).sort()).toEqual(
        [room, kept].sort(),
      );
      expect(await restoreBoth()).toEqual([[kept], [room]]);
    });

    it('ends the stored sessions of an identity disconnected remotely', async () => {
      const t = await setup();
      const who = uniqueId('user');
      const c = uniqueId('conn');
      await t.connect(c, {}, who);
      await t.subscribe(c, 'a');
      await t.gateway.disconnect(c);
      await t.broker.handleCommand({ command: 'disconnect', payload: { identifier: who } });
      // A later millisecond: a session started in the revocation's own millisecond counts as
      // started before it (ties revoke).
      await new Promise((r) => setTimeout(r, 5));
      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! }, who);
      expect(await t.restored(next)).toEqual([]);
      expect(await t.gateway.welcome(next)).toBe(true);
      // A new session, not restored: no `restored` in its welcome.
      expect((await t.stored(t.sids[1]!))?.restoredIds).toBeUndefined();

      // The new session is not ended by the earlier command.
      await t.subscribe(next, 'b');
      await t.gateway.disconnect(next);
      const third = uniqueId('conn');
      await t.connect(third, { sid: t.sids[1]! }, who);
      expect(await t.restored(third)).toEqual(['b']);
    });

    it('ends the session of a connection disconnected remotely by its id', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      await t.connect(c);
      await t.subscribe(c, 'a');
      await t.broker.handleCommand({ command: 'disconnect', payload: { connectionId: c } });
      await t.gateway.disconnect(c); // what API Gateway sends after the close
      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! });
      expect(await t.restored(next)).toEqual([]);
    });

    it('posts welcome once when two welcome calls run at once', async () => {
      const api = new MemoryConnectionApi();
      const t = await setup(api);
      const c = uniqueId('conn');
      await t.connect(c);
      const results = await Promise.all([t.gateway.welcome(c), t.gateway.welcome(c)]);
      expect(results).toEqual([true, true]);
      expect(api.framesOf(c)).toEqual([{ type: 'welcome', sid: t.sids[0] }]);
      expect(await t.gateway.welcome(c)).toBe(true);
      expect(api.framesOf(c)).toHaveLength(1);
    });

    it('releases the welcome when the connection is not reachable yet, so the next call posts it', async () => {
      const memory = new MemoryConnectionApi();
      let unreachable = 1;
      const api: ConnectionApi = {
        post: async (id, frame, endpoint) =>
          unreachable-- > 0 ? 'gone' : memory.post(id, frame, endpoint),
        close: (id, endpoint) => memory.close(id, endpoint),
      };
      const t = await setup(api);
      const old = uniqueId('conn');
      await t.connect(old);
      await t.subscribe(old, 'a');
      await t.gateway.disconnect(old);
      const c = uniqueId('conn');
      await t.connect(c, { sid: t.sids[0]! });
      unreachable = 1;
      expect(await t.gateway.welcome(c)).toBe(false);
      expect(await t.gateway.welcome(c)).toBe(true);
      expect(memory.framesOf(c)).toEqual([
        { type: 'welcome', sid: t.sids[1], restored: true, restored_ids: [pubsub('a')] },
      ]);
    });
  });
}
