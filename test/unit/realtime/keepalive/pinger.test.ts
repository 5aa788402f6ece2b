import { describe, expect, it } from 'vitest';
import { ConfigError, MAX_PING_INTERVAL, Pinger } from '../../../../lib/core';
import { parsePingInterval } from '../../../../lib/realtime/keepalive/ping-interval';
import { CountingStore } from '../../../helpers/counting-store';
import { EXT, gatewayHarness, pubsub } from '../../../helpers/gateway';

const TICK_MS = 250;

/** `storeLagMs`: each write is stored that long after it was dated (a slow or retried write). */
function setup({ storeLagMs = 0 } = {}) {
  const t = gatewayHarness({
    config: { publicStreams: true },
    store: (clock) => new CountingStore({ clock: { now: () => clock.now() - storeLagMs } }),
  });
  const pinger = t.pinger({ defaultInterval: 3 });
  /** `$connect` only: the pinger delivers the welcome. */
  const connect = async (connectionId: string, query: Record<string, string> = {}) => {
    await t.connect(connectionId, { sub: connectionId, ttlSeconds: 3600, query, endpoint: null });
  };
  /** Ticks for `ms`, as the pinger function does. */
  const run = (ms: number) => t.tick(pinger, ms, { tickMs: TICK_MS });
  const framesOf = (id: string) => t.frames(id);
  const pings = (id: string) => framesOf(id).filter((f) => f.type === 'ping').length;
  const publish = (stream: string, n: number) => t.publish(stream, { n });
  return { ...t, pinger, connect, run, framesOf, pings, publish };
}

describe('Pinger: welcome', () => {
  it('welcomes a new connection on its next tick, once, with no Lambda per connect', async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('c1');
    await t.run(5 * TICK_MS);
    expect(t.framesOf('c1').filter((f) => f.type === 'welcome')).toEqual([
      { type: 'welcome', sid: expect.any(String) },
    ]);
    expect(t.pinger.report().welcomed).toBe(1);
  });

  it('tries again, backing off, while the connection is not reachable (410 until $connect returned)', async () => {
    const t = setup();
    await t.pinger.start();
    t.api.markGone('c1');
    await t.connect('c1');
    await t.run(3 * TICK_MS);
    expect(t.framesOf('c1')).toEqual([]);
    t.api.markReachable('c1');
    await t.run(2 * TICK_MS); // retries back off: 100 ms more after each miss
    expect(t.framesOf('c1').map((f) => f.type)).toEqual(['welcome']);
    expect(await t.store.getConnection('c1')).toBeDefined();
  });

  it('gives a connection that never becomes reachable up after the welcome timeout, with a warning', async () => {
    const t = setup();
    await t.pinger.start();
    t.api.markGone('c1');
    await t.connect('c1');
    await t.run(30_000);
    expect(t.logger.warnings()).toEqual([]); // still trying: $connect can take long under load
    await t.run(32_000);
    expect(t.logger.warnings()).toContain(
      'welcome not delivered: the connection never became reachable',
    );
    expect(t.pinger.report().connections).toBe(0);
  });

  it('welcomes a connection stored seconds after it was dated: every 5 s a read goes back 35 s', async () => {
    const t = setup({ storeLagMs: 20_000 });
    await t.pinger.start();
    await t.run(1_000);
    await t.connect('late');
    await t.run(3_000);
    expect(t.framesOf('late')).toEqual([]); // the tick reads, back 1 s, missed it
    await t.run(2_000);
    expect(t.framesOf('late')).toEqual([{ type: 'welcome', sid: expect.any(String) }]);
    await t.run(40_000);
    expect(t.framesOf('late').filter((f) => f.type === 'welcome')).toHaveLength(1);
    expect(t.pings('late')).toBeGreaterThanOrEqual(10);
  });

  it("starts no welcome at or after the run's stop time, and the next run welcomes that connection", async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('c1');
    await t.pinger.tick(t.clock.now()); // the run's Lambda is about to time out
    expect(t.framesOf('c1')).toEqual([]);
    t.clock.advance(10_000);
    const next = new Pinger({
      store: t.store,
      api: t.api,
      sessions: t.sessions,
      history: t.broker,
      welcomer: t.gateway,
      defaultInterval: 3,
      clock: t.clock,
    });
    await next.tick(t.clock.now() + 60_000);
    expect(t.framesOf('c1')).toEqual([{ type: 'welcome', sid: expect.any(String) }]);
    t.clock.advance(3_000); // a ping is due, and so is the stop
    await next.tick(t.clock.now());
    expect(t.pings('c1')).toBe(0);
    await next.tick();
    expect(t.pings('c1')).toBe(1);
  });

  it('refuses late reads that reach back past the welcome timeout (a first read would skip what they find)', () => {
    const t = setup();
    const options = { store: t.store, api: t.api, sessions: t.sessions, welcomer: t.gateway };
    expect(() => new Pinger({ ...options, defaultInterval: 3, lateWindowMs: 60_000 })).toThrow(
      new ConfigError('lateWindowMs must be under welcomeTimeoutMs', { variable: 'lateWindowMs' }),
    );
    expect(
      () =>
        new Pinger({
          ...options,
          defaultInterval: 3,
          welcomeTimeoutMs: 120_000,
          lateWindowMs: 60_000,
        }),
    ).not.toThrow();
  });

  it('refuses a presence expiry interval that is negative or not finite', () => {
    const t = setup();
    const options = { store: t.store, api: t.api, sessions: t.sessions, welcomer: t.gateway };
    for (const presenceExpiryEveryMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new Pinger({ ...options, defaultInterval: 3, presenceExpiryEveryMs })).toThrow(
        new ConfigError('presenceExpiryEveryMs must be a finite number >= 0', {
          variable: 'presenceExpiryEveryMs',
        }),
      );
    }
    expect(
      () => new Pinger({ ...options, defaultInterval: 3, presenceExpiryEveryMs: 0 }),
    ).not.toThrow();
  });

  it('disconnects a refused connection as unauthorized, closes it, and never pings it', async () => {
    const t = setup();
    await t.pinger.start();
    await t.gateway.connect({ connectionId: 'bad', query: { jid: 'nope' }, protocols: EXT });
    await t.run(10_000);
    expect(t.framesOf('bad')).toEqual([
      { type: 'disconnect', reason: 'unauthorized', reconnect: false },
    ]);
    expect(t.api.isClosed('bad')).toBe(true);
  });

  it('does not welcome again a connection an earlier run found (its first read), and pings it within half an interval', async () => {
    const t = setup();
    await t.connect('old');
    await t.gateway.welcome('old');
    t.clock.advance(30_000);
    t.api.clear();
    await t.pinger.start();
    await t.run(1_750);
    expect(t.framesOf('old').map((f) => f.type)).toEqual(['ping']);
  });
  it('takes over a young connection an earlier run welcomed: no second welcome, a ping within half an interval', async () => {
    const t = setup();
    await t.connect('young');
    await t.gateway.welcome('young');
    t.clock.advance(5_000); // younger than the welcome timeout: the first read tries again
    t.api.clear();
    await t.pinger.start();
    await t.run(1_750);
    expect(t.framesOf('young').map((f) => f.type)).toEqual(['ping']);
  });
});

describe('Pinger: pings', () => {
  it('pings every connection at the default interval (3 s) and each at its own `pi`', async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('default');
    await t.connect('slow', { pi: '30' });
    await t.run(61_000);
    expect(t.pings('default')).toBeGreaterThanOrEqual(19);
    expect(t.pings('default')).toBeLessThanOrEqual(20);
    expect(t.pings('slow')).toBe(2);
    const frame = t.framesOf('default').find((f) => f.type === 'ping');
    expect(frame).toEqual({ type: 'ping', message: expect.any(Number) });
  });

  it('spares a connection whose stream had a broadcast within its interval', async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('busy');
    await t.connect('idle');
    await t.run(TICK_MS);
    await t.gateway.receive(
      'busy',
      JSON.stringify({ command: 'subscribe', identifier: pubsub('s') }),
    );
    for (let n = 1; n <= 30; n++) {
      await t.publish('s', n);
      await t.run(2_000);
    }
    expect(t.pings('busy')).toBe(0);
    expect(t.pings('idle')).toBeGreaterThanOrEqual(19);
    expect(t.pinger.report().spared).toBeGreaterThan(0);
    // Once the stream is quiet, the busy connection is pinged again.
    await t.run(4_000);
    expect(t.pings('busy')).toBe(1);
  });

  it('pings a connection again once it left its busy stream (an unsubscribe marks it changed)', async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('c1');
    await t.run(TICK_MS);
    const subscribe = { command: 'subscribe', identifier: pubsub('s') };
    await t.gateway.receive('c1', JSON.stringify(subscribe));
    await t.publish('s', 0);
    await t.run(2_000);
    await t.gateway.receive('c1', JSON.stringify({ ...subscribe, command: 'unsubscribe' }));
    for (let n = 1; n <= 10; n++) {
      await t.publish('s', n);
      await t.run(1_000);
    }
    expect(t.pings('c1')).toBeGreaterThanOrEqual(3);
  });

  it('reads each connection once per run, whatever the number of pings: later reads return only changes', async () => {
    const t = setup();
    for (let i = 0; i < 50; i++) await t.connect(`c${i}`);
    for (let i = 0; i < 50; i++) await t.gateway.welcome(`c${i}`);
    t.clock.advance(40_000);
    t.store.subscriptionReads = 0;
    await t.pinger.start();
    await t.run(2_000); // the late reads' window (35 s) has passed too
    const before = t.store.itemsRead;
    await t.run(58_000);
    const after = t.store.itemsRead;
    expect(t.store.changeReads[0]).toEqual({ since: 0, items: 50 });
    expect(t.store.changeReads.slice(1).every((r) => r.since > 0)).toBe(true);
    expect(after - before).toBe(0);
    expect(t.store.subscriptionReads).toBe(0);
    expect(t.pinger.report().sent).toBeGreaterThanOrEqual(50 * 19);
  });

  it('reads a new connection a bounded number of times, whatever its ping interval: the ticks within 1 s and the late reads within 35 s', async () => {
    const itemsRead = async (pi: string) => {
      const t = setup();
      await t.pinger.start();
      for (let i = 0; i < 50; i++) await t.connect(`c${i}`, { pi });
      await t.run(60_000);
      expect(t.pinger.report().welcomed).toBe(50);
      return t.store.itemsRead;
    };
    const every1s = await itemsRead('1');
    const every60s = await itemsRead('60');
    expect(every1s).toBe(every60s);
    // 1 s / 250 ms ticks, and 35 s / 5 s late reads, each plus one at the window's edge.
    expect(every1s).toBeGreaterThanOrEqual(50 * 12);
    expect(every1s).toBeLessThanOrEqual(50 * 14);
  });

  it('forgets a connection that answers 410 and disconnects it when it is still stored', async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('c1');
    await t.connect('c2');
    await t.run(TICK_MS);
    t.clock.advance(20_000); // past the gone grace
    t.api.markGone('c1');
    await t.run(10_000);
    expect(await t.store.getConnection('c1')).toBeUndefined();
    expect(t.pinger.report()).toMatchObject({ gone: 1, connections: 1 });
    expect(t.pings('c2')).toBeGreaterThanOrEqual(3);
  });

  it('logs a ping that fails and tries that connection again a second later', async () => {
    const t = setup();
    await t.pinger.start();
    await t.connect('c1');
    await t.run(TICK_MS);
    t.api.failPostsTo('c1', new Error('throttled'));
    await t.run(4_000);
    expect(t.logger.at('error').map((e) => e.message)).toContain('ping failed');
    t.api.healPostsTo('c1');
    await t.run(1_250);
    expect(t.pings('c1')).toBe(1);
  });
});

describe('the `pi` query parameter', () => {
  it.each([
    ['30', 30],
    ['1', 1],
    [String(MAX_PING_INTERVAL), MAX_PING_INTERVAL],
    [undefined, undefined],
    ['', undefined],
  ])('accepts %j as %j seconds', (pi, expected) => {
    expect(parsePingInterval(pi)).toBe(expected);
  });

  it.each(['0', '-5', '2.5', 'abc', '1e3', String(MAX_PING_INTERVAL + 1)])(
    'refuses %j with the allowed range',
    (pi) => {
      expect(parsePingInterval(pi)).toMatch(
        /^pi must be an integer number of seconds from 1 to 540/,
      );
    },
  );

  it('is stored with the connection; a bad one is logged and the default interval used', async () => {
    const t = setup();
    await t.connect('chosen', { pi: '45' });
    await t.connect('bad', { pi: 'often' });
    expect((await t.store.getConnection('chosen'))?.pingInterval).toBe(45);
    expect((await t.store.getConnection('bad'))?.pingInterval).toBeUndefined();
    expect(t.logger.at('warn')).toEqual([
      expect.objectContaining({
        message: 'ping interval ignored',
        fields: expect.objectContaining({ reason: expect.stringContaining('"often"') }),
      }),
    ]);
  });
});
