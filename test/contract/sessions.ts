import { describe, expect, it } from 'vitest';
import {
  type Broadcaster,
  type Broker,
  type ConnectionApi,
  type ConnectionRecord,
  type ConnectionStore,
  composeRealtime,
  createConnectToken,
  defaultGatewayConfig,
  type SessionCache,
  type SubscriberSlice,
  type Subscription,
} from '../../lib/core';
import { Session } from '../../lib/realtime/session';
import { MemoryConnectionApi } from '../../lib/testing';
import { FakeClock } from '../helpers/clock';

const EXT = 'actioncable-v1-ext-json';
const JWT_SECRET = 'jwt-secret';

/** The connection store, the session cache and (given its broadcaster and that cache) the broker. */
export type SessionStoresFactory = (options: { clock: FakeClock }) => Promise<{
  store: ConnectionStore;
  sessions: SessionCache;
  /** A broker over `broadcaster`, keeping its sessions in `sessions`. */
  broker: (broadcaster: Broadcaster, sessions: SessionCache) => Broker;
}>;

let unique = 0;
/** An id no other test uses (the tables are shared). */
function uniqueId(label: string): string {
  unique++;
  return `${label}-${process.pid}-${Date.now()}-${unique}`;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * A store whose `subscriptionsOf` can hold its answer: the read happens, then waits for a
 * gate, like a Lambda paused between reading the subscriptions and writing the session.
 */
class PausingStore implements ConnectionStore {
  private hold?: {
    when: (subs: Subscription[]) => boolean;
    reached: () => void;
    gate: Promise<void>;
  };

  constructor(private readonly inner: ConnectionStore) {}

  /** Holds the next read whose result satisfies `when`; resolves once it is held. */
  pauseRead(when: (subs: Subscription[]) => boolean): { held: Promise<void>; release: () => void } {
    const reached = deferred();
    const gate = deferred();
    this.hold = { when, reached: reached.resolve, gate: gate.promise };
    return { held: reached.promise, release: gate.resolve };
  }

  async subscriptionsOf(connectionId: string): Promise<Subscription[]> {
    const subs = await this.inner.subscriptionsOf(connectionId);
    const hold = this.hold;
    if (hold?.when(subs)) {
      this.hold = undefined;
      hold.reached();
      await hold.gate;
    }
    return subs;
  }

  putConnection(c: ConnectionRecord) {
    return this.inner.putConnection(c);
  }
  getConnection(id: string) {
    return this.inner.getConnection(id);
  }
  connectionsOf(identity: string) {
    return this.inner.connectionsOf(identity);
  }
  addSubscription(s: Subscription) {
    return this.inner.addSubscription(s);
  }
  removeSubscription(id: string, stream: string, identifier: string) {
    return this.inner.removeSubscription(id, stream, identifier);
  }
  subscribersOf(stream: string, pageSize?: number) {
    return this.inner.subscribersOf(stream, pageSize);
  }
  readSlice(slice: SubscriberSlice, limit: number) {
    return this.inner.readSlice(slice, limit);
  }
  spreadStream(stream: string, spread: number) {
    return this.inner.spreadStream(stream, spread);
  }
  removeConnection(id: string) {
    return this.inner.removeConnection(id);
  }
  changesSince(sinceMs: number, pageSize?: number) {
    return this.inner.changesSince(sinceMs, pageSize);
  }
}

/**
 * Session writes of one connection under concurrency: frames of one connection handled at
 * once by separate Lambdas, and concurrent welcome calls. Run against memory in unit tests
 * and against DynamoDB Local in integration tests.
 */
export function gatewaySessionContract(name: string, factory: SessionStoresFactory): void {
  describe(`${name} (Gateway sessions under concurrency)`, () => {
    async function setup(api: ConnectionApi = new MemoryConnectionApi()) {
      const clock = new FakeClock();
      const stores = await factory({ clock });
      const pausing = new PausingStore(stores.store);
      const { sessions } = stores;
      const sids: string[] = [];
      const { broker, gateway } = composeRealtime(
        {
          store: pausing,
          api,
          sessions,
          clock,
          config: { ...defaultGatewayConfig(), jwtSecret: JWT_SECRET, publicStreams: true },
          newSid: () => {
            const sid = uniqueId('sid');
            sids.push(sid);
            return sid;
          },
        },
        stores.broker,
      );
      async function connect(connectionId: string, query: Record<string, string> = {}) {
        const jid = await createConnectToken({ sub: 'alice', ttlSeconds: 600 }, JWT_SECRET, clock);
        await gateway.connect({ connectionId, query: { jid, ...query }, protocols: EXT });
      }
      const subscribe = (connectionId: string, stream: string) =>
        gateway.receive(
          connectionId,
          JSON.stringify({ command: 'subscribe', identifier: pubsub(stream) }),
        );
      const stored = async (sid: string) => Session.decode(await broker.restoreSession(sid));
      return { clock, store: pausing, broker, gateway, sids, connect, subscribe, stored };
    }

    const pubsub = (stream: string) => JSON.stringify({ channel: '$pubsub', stream_name: stream });

    it('keeps both subscriptions when two subscribes of one connection commit concurrently', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      await t.connect(c);
      await t.gateway.welcome(c);
      // The first subscribe's commit reads the subscriptions (only `x`) and stalls there,
      // while the second subscribe runs to its end.
      const pause = t.store.pauseRead((subs) => subs.some((s) => s.stream === 'x'));
      const first = t.subscribe(c, 'x');
      await pause.held;
      await t.subscribe(c, 'y');
      pause.release();
      await first;
      const session = await t.stored(t.sids[0]!);
      expect(session?.subscriptions.map((s) => s.stream).sort()).toEqual(['x', 'y']);
      expect(session?.welcomed).toBe(true);

      await t.gateway.disconnect(c);
      const next = uniqueId('conn');
      await t.connect(next, { sid: t.sids[0]! });
      expect((await t.store.subscriptionsOf(next)).map((s) => s.stream).sort()).toEqual(['x', 'y']);
    });

    it('keeps every subscription of many subscribes sent at once', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      await t.connect(c);
      await t.gateway.welcome(c);
      const streams = Array.from({ length: 8 }, (_, i) => `s${i}`);
      await Promise.all(streams.map((s) => t.subscribe(c, s)));
      const session = await t.stored(t.sids[0]!);
      expect(session?.subscriptions.map((s) => s.stream).sort()).toEqual(streams);
    });

    it('keeps the welcome when a subscribe commits across it', async () => {
      const t = await setup();
      const c = uniqueId('conn');
      await t.connect(c);
      const pause = t.store.pauseRead((subs) => subs.some((s) => s.stream === 'x'));
      const subscribing = t.subscribe(c, 'x');
      await pause.held;
      expect(await t.gateway.welcome(c)).toBe(true);
      pause.release();
      await subscribing;
      expect(await t.stored(t.sids[0]!)).toMatchObject({ welcomed: true });
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
