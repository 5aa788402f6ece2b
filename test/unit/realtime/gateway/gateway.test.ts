import { describe, expect, it } from 'vitest';
import {
  createConnectToken,
  defaultBrokerConfig,
  defaultGatewayConfig,
  Fanout,
  type GatewayConfig,
  MemoryRevocationStore,
  signStreamName,
} from '../../../../lib/core';
import { MemoryBroker, MemoryConnectionStore, MemorySessionCache } from '../../../../lib/testing';
import { gatewaySessionContract } from '../../../contract/sessions';
import { EXT, gatewayHarness, pubsub, STREAMS_SECRET, signedId } from '../../../helpers/gateway';

const PLAIN = 'actioncable-v1-json';

/** The harness with public names of any prefix (the public prefix has tests of its own). */
const setup = (config: Partial<GatewayConfig> = {}) => gatewayHarness({ config });

gatewaySessionContract('MemoryConnectionStore + MemoryBroker', async ({ clock }) => ({
  store: new MemoryConnectionStore(),
  sessions: new MemorySessionCache({ clock }),
  revocations: new MemoryRevocationStore(),
  broker: (broadcaster, sessions) => new MemoryBroker({ broadcaster, sessions, clock }),
}));

describe('Gateway: connecting', () => {
  it('welcomes a client with a valid JWT with its new sid, once', async () => {
    const t = setup();
    expect(await t.open('c1')).toEqual({ statusCode: 200, protocol: EXT });
    expect(t.frames('c1')).toEqual([{ type: 'welcome', sid: 'sid-1' }]);
    expect(await t.gateway.welcome('c1')).toBe(true);
    expect(t.frames('c1')).toHaveLength(1);
    expect((await t.store.getConnection('c1'))?.identity).toBe('alice');
  });

  it('prefers the extended subprotocol, falls back to plain and refuses anything else', async () => {
    const t = setup();
    const connect = (connectionId: string, protocols?: string) =>
      t.gateway.connect({ connectionId, query: {}, ...(protocols ? { protocols } : {}) });
    expect(await connect('a', `${PLAIN}, ${EXT}`)).toMatchObject({ protocol: EXT });
    expect(await connect('b', PLAIN)).toMatchObject({ statusCode: 200, protocol: PLAIN });
    expect(await connect('c', 'graphql-ws')).toEqual({ statusCode: 400 });
    expect(await connect('d')).toEqual({ statusCode: 400 });
    expect(await t.store.getConnection('c')).toBeUndefined();
  });

  it.each([
    ['a malformed token', async () => 'not-a-jwt'],
    [
      'a token signed with another secret',
      () => createConnectToken({ sub: 'x', ttlSeconds: 60 }, 'other'),
    ],
  ])('accepts the upgrade, then disconnects %s as unauthorized and closes', async (_, jid) => {
    const t = setup();
    const result = await t.gateway.connect({
      connectionId: 'c1',
      query: { jid: await jid() },
      protocols: EXT,
    });
    expect(result).toEqual({ statusCode: 200, protocol: EXT });
    expect(t.frames('c1')).toEqual([]);
    expect(await t.gateway.welcome('c1')).toBe(true);
    expect(t.frames('c1')).toEqual([
      { type: 'disconnect', reason: 'unauthorized', reconnect: false },
    ]);
    expect(t.api.isClosed('c1')).toBe(true);
  });

  it('disconnects an expired token as token_expired (AnyCable clients refresh it)', async () => {
    const t = setup();
    const jid = await t.token('alice', 60);
    t.clock.advanceSeconds(60 + defaultGatewayConfig().jwtClockSkew + 1);
    await t.gateway.connect({ connectionId: 'c1', query: { jid }, protocols: EXT });
    await t.gateway.welcome('c1');
    expect(t.frames('c1')).toEqual([
      { type: 'disconnect', reason: 'token_expired', reconnect: false },
    ]);
    expect(t.api.isClosed('c1')).toBe(true);
  });

  it('ignores every frame of an unauthorized connection', async () => {
    const t = setup({ publicStreams: true });
    await t.gateway.connect({ connectionId: 'c1', query: { jid: 'bad' }, protocols: EXT });
    await t.subscribe('c1', pubsub('s'));
    expect(await t.store.subscriptionsOf('c1')).toEqual([]);
    expect(t.frames('c1')).toEqual([]);
  });

  it('accepts a client without token only when anonymous connections are allowed', async () => {
    const closed = setup();
    await closed.open('c1', { sub: null });
    expect(closed.frames('c1')).toEqual([
      { type: 'disconnect', reason: 'unauthorized', reconnect: false },
    ]);

    const open = setup({ allowAnonymous: true });
    await open.open('c1', { sub: null });
    expect(open.frames('c1')).toEqual([{ type: 'welcome', sid: 'sid-1' }]);
    expect((await open.store.getConnection('c1'))?.identity).toBe('');
    // A token that is present is still verified.
    await open.gateway.connect({ connectionId: 'c2', query: { jid: 'bad' }, protocols: EXT });
    await open.gateway.welcome('c2');
    expect(open.frames('c2')).toEqual([
      { type: 'disconnect', reason: 'unauthorized', reconnect: false },
    ]);
  });

  it('does not welcome a connection API Gateway cannot reach yet, and welcomes it on the next call', async () => {
    const t = setup();
    await t.gateway.connect({
      connectionId: 'c1',
      query: { jid: await t.token('a') },
      protocols: EXT,
    });
    t.api.markGone('c1');
    expect(await t.gateway.welcome('c1')).toBe(false);
    expect(await t.gateway.welcome('unknown')).toBe(false);
  });

  it('gives a claimed welcome back when its post throws, so the next call posts it', async () => {
    const t = setup();
    await t.gateway.connect({
      connectionId: 'c1',
      query: { jid: await t.token('a') },
      protocols: EXT,
    });
    const post = t.api.post.bind(t.api);
    t.api.post = async () => {
      t.api.post = post;
      throw new Error('throttled');
    };
    await expect(t.gateway.welcome('c1')).rejects.toThrow('throttled');
    expect(await t.gateway.welcome('c1')).toBe(true);
    expect(t.frames('c1')).toEqual([{ type: 'welcome', sid: 'sid-1' }]);
  });

  it('finishes the session and removes the connection on disconnect', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.gateway.disconnect('c1');
    expect(await t.store.getConnection('c1')).toBeUndefined();
    expect(await t.store.subscriptionsOf('c1')).toEqual([]);
    t.clock.advanceSeconds(defaultBrokerConfig().sessionsTtl + 1);
    expect(await t.broker.restoreSession('sid-1')).toBeNull();
  });
});

describe('Gateway: subscriptions', () => {
  it('rejects a public stream while public streams are off', async () => {
    const t = setup();
    await t.open('c1');
    await t.subscribe('c1', pubsub('chat/1'));
    expect(t.frames('c1').at(-1)).toEqual({
      type: 'reject_subscription',
      identifier: pubsub('chat/1'),
    });
    expect(await t.store.subscriptionsOf('c1')).toEqual([]);
  });

  it('confirms a public stream when public streams are on, echoing the identifier', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    const identifier = ` ${pubsub('chat/1')}`;
    await t.subscribe('c1', identifier);
    expect(t.frames('c1').at(-1)).toEqual({ type: 'confirm_subscription', identifier });
  });

  it('confirms a signed stream and rejects a forged or foreign signature', async () => {
    const t = setup();
    await t.open('c1');
    await t.subscribe('c1', signedId('orders/1'));
    expect(t.frames('c1').at(-1)).toEqual({
      type: 'confirm_subscription',
      identifier: signedId('orders/1'),
    });
    const encoded = signStreamName('secret', STREAMS_SECRET).split('--')[0];
    const forged = JSON.stringify({
      channel: '$pubsub',
      signed_stream_name: `${encoded}--${'0'.repeat(64)}`,
    });
    await t.subscribe('c1', forged);
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_subscription', identifier: forged });
    await t.subscribe('c1', signedId('orders/2', 'another-secret'));
    expect(t.frames('c1').at(-1)).toMatchObject({ type: 'reject_subscription' });
    expect((await t.store.subscriptionsOf('c1')).map((s) => s.stream)).toEqual(['orders/1']);
  });

  it('rejects application channels', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    const identifier = JSON.stringify({ channel: 'ChatChannel', id: 1 });
    await t.subscribe('c1', identifier);
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_subscription', identifier });
  });

  it('confirms a repeated subscribe once: the repeat gets no frame, no second subscription, no second delivery', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'), { since: 0 });
    await t.publish('s', { n: 1 });
    await t.subscribe('c1', pubsub('s'), { since: 0 });
    // AnyCable's clients unsubscribe on a confirm they no longer wait for.
    expect(t.frames('c1').filter((f) => f.type === 'confirm_subscription')).toHaveLength(1);
    expect(t.frames('c1').filter((f) => f.type === 'confirm_history')).toHaveLength(1);
    expect(await t.store.subscriptionsOf('c1')).toHaveLength(1);
    expect(t.logger.entries.map((e) => e.message)).toContain(
      'subscribe: already subscribed, not confirmed again',
    );
    await t.publish('s', { n: 2 });
    expect(t.messagesOf('c1')).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('confirms exactly one of two subscribes of the same identifier running at once (the client retries after 5 s)', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await Promise.all([t.subscribe('c1', pubsub('s')), t.subscribe('c1', pubsub('s'))]);
    expect(t.frames('c1').filter((f) => f.type === 'confirm_subscription')).toHaveLength(1);
    await t.publish('s', { n: 1 });
    expect(t.messagesOf('c1')).toEqual([{ n: 1 }]);
  });

  it('removes a subscription whose confirm could not be posted, so that the retry confirms it', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    t.api.failPostsTo('c1', new Error('throttled'));
    await t.subscribe('c1', pubsub('s'));
    expect(t.logger.entries.filter((e) => e.level === 'error')).toEqual([
      expect.objectContaining({
        message: 'frame failed',
        fields: expect.objectContaining({ error: 'throttled' }),
      }),
    ]);
    expect(await t.store.subscriptionsOf('c1')).toEqual([]);
    t.api.healPostsTo('c1');
    await t.subscribe('c1', pubsub('s'));
    expect(t.frames('c1').filter((f) => f.type === 'confirm_subscription')).toHaveLength(1);
    expect(await t.store.subscriptionsOf('c1')).toHaveLength(1);
  });

  it('stops delivering after unsubscribe', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.send('c1', { command: 'unsubscribe', identifier: pubsub('s') });
    await t.publish('s', { n: 1 });
    expect(t.messagesOf('c1')).toEqual([]);
  });
});

describe('Gateway: broadcasts', () => {
  it('delivers a broker broadcast as identifier, decoded message, stream_id, epoch and offset', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.open('c2', { sub: 'bob' });
    await t.subscribe('c1', pubsub('chat/1'));
    await t.subscribe('c2', signedId('chat/1'));
    await t.open('c3');
    await t.subscribe('c3', pubsub('chat/other'));
    await t.publish('chat/1', { text: 'hi' });
    await t.publish('chat/1', 'plain text');
    const [first, second] = t.frames('c1').slice(-2);
    expect(first).toEqual({
      identifier: pubsub('chat/1'),
      message: { text: 'hi' },
      stream_id: 'chat/1',
      epoch: expect.any(String),
      offset: 1,
    });
    expect(second).toMatchObject({ message: 'plain text', offset: 2, epoch: first!.epoch });
    expect(
      t
        .frames('c2')
        .slice(-2)
        .map((f) => [f.identifier, f.offset]),
    ).toEqual([
      [signedId('chat/1'), 1],
      [signedId('chat/1'), 2],
    ]);
    expect(t.messagesOf('c3')).toEqual([]);
  });

  it('sends a transient broadcast without stream_id, epoch or offset', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.broker.handleBroadcast({ stream: 's', data: '{"x":1}', meta: { transient: true } });
    expect(t.frames('c1').at(-1)).toEqual({ identifier: pubsub('s'), message: { x: 1 } });
  });

  it('removes only the connection that answers 410, once it is past the connect grace period', async () => {
    const t = setup({ publicStreams: true });
    for (const c of ['c1', 'c2', 'c3']) {
      await t.open(c);
      await t.subscribe(c, pubsub('s'));
    }
    t.api.markGone('c2');
    await t.publish('s', { n: 1 });
    expect(await t.store.getConnection('c2')).toBeDefined();
    t.clock.advanceSeconds(11);
    await t.publish('s', { n: 2 });
    expect(await t.store.getConnection('c2')).toBeUndefined();
    expect(await t.store.getConnection('c1')).toBeDefined();
    expect(t.messagesOf('c1')).toEqual([{ n: 1 }, { n: 2 }]);
    expect(t.messagesOf('c3')).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('keeps delivering to the others when one post throws', async () => {
    const t = setup({ publicStreams: true });
    for (const c of ['c1', 'c2', 'c3']) {
      await t.open(c);
      await t.subscribe(c, pubsub('s'));
    }
    t.api.failPostsTo('c1');
    await t.publish('s', { n: 1 });
    expect(t.messagesOf('c2')).toEqual([{ n: 1 }]);
    expect(t.messagesOf('c3')).toEqual([{ n: 1 }]);
    expect(await t.store.getConnection('c1')).toBeDefined();
    expect(t.logger.entries.some((e) => e.level === 'error')).toBe(true);
  });

  it('fans out with bounded concurrency', async () => {
    const store = new MemoryConnectionStore();
    let inFlight = 0;
    let peak = 0;
    const api = {
      async post() {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setTimeout(r, 1));
        inFlight--;
        return 'sent' as const;
      },
      async close() {},
    };
    for (let i = 0; i < 40; i++) {
      await store.addSubscription({ connectionId: `c${i}`, stream: 's', identifier: 'i' });
    }
    const sessions = { finishSession: async () => {}, updateSession: async () => false };
    await new Fanout({ store, api, sessions, concurrency: 7 }).broadcast({
      stream: 's',
      data: '1',
    });
    expect(peak).toBe(7);
  });

  it('disconnects every connection of an identity on a remote disconnect, and only those', async () => {
    const t = setup();
    await t.open('a1', { sub: 'alice' });
    await t.open('a2', { sub: 'alice' });
    await t.open('b1', { sub: 'bob' });
    await t.broker.handleCommand({ command: 'disconnect', payload: { identity: 'alice' } });
    for (const c of ['a1', 'a2']) {
      expect(t.frames(c).at(-1)).toEqual({ type: 'disconnect', reason: 'remote', reconnect: true });
      expect(t.api.isClosed(c)).toBe(true);
    }
    expect(t.api.isClosed('b1')).toBe(false);
    await t.broker.handleCommand({
      command: 'disconnect',
      payload: { connectionId: 'b1', reconnect: false },
    });
    expect(t.frames('b1').at(-1)).toEqual({
      type: 'disconnect',
      reason: 'remote',
      reconnect: false,
    });
    expect(t.api.isClosed('b1')).toBe(true);
  });

  it("removes a stream's subscriptions on a remote unsubscribe", async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.subscribe('c1', pubsub('kept'));
    await t.broker.handleCommand({ command: 'unsubscribe', payload: { stream: 's' } });
    await t.publish('s', 'x');
    await t.publish('kept', 'y');
    expect(t.messagesOf('c1')).toEqual(['y']);
  });
});

describe('Gateway: history', () => {
  async function withMessages(n: number) {
    const t = setup({ publicStreams: true });
    await t.open('writer');
    await t.subscribe('writer', pubsub('s'));
    for (let i = 1; i <= n; i++) await t.publish('s', { i });
    const epoch = t.frames('writer').at(-1)!.epoch as string;
    return { ...t, epoch };
  }

  it('replays exactly the messages after the position, in order, then confirms', async () => {
    const t = await withMessages(5);
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'), { streams: { s: { epoch: t.epoch, offset: 2 } } });
    const after = t.frames('c1').slice(1);
    expect(after[0]).toEqual({ type: 'confirm_subscription', identifier: pubsub('s') });
    expect(after.slice(1, -1).map((f) => [f.message, f.offset, f.stream_id])).toEqual([
      [{ i: 3 }, 3, 's'],
      [{ i: 4 }, 4, 's'],
      [{ i: 5 }, 5, 's'],
    ]);
    expect(after.at(-1)).toEqual({ type: 'confirm_history', identifier: pubsub('s') });
  });

  it('answers the history command the same way, and since when no position is given', async () => {
    const t = await withMessages(0);
    await t.publish('s', { i: 1 });
    t.clock.advanceSeconds(10);
    const since = Math.floor(t.clock.now() / 1000);
    await t.publish('s', { i: 2 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.send('c1', { command: 'history', identifier: pubsub('s'), history: { since } });
    expect(t.messagesOf('c1')).toEqual([{ i: 2 }]);
    expect(t.frames('c1').at(-1)).toEqual({ type: 'confirm_history', identifier: pubsub('s') });
  });

  it('rejects history from an unknown epoch with no partial replay', async () => {
    const t = await withMessages(3);
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'), { streams: { s: { epoch: 'nope', offset: 1 } } });
    expect(t.frames('c1').slice(1)).toEqual([
      { type: 'confirm_subscription', identifier: pubsub('s') },
      { type: 'reject_history', identifier: pubsub('s') },
    ]);
  });

  it('rejects history across a gap with no partial replay', async () => {
    const t = await withMessages(defaultBrokerConfig().historyLimit + 5);
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.send('c1', {
      command: 'history',
      identifier: pubsub('s'),
      history: { streams: { s: { epoch: t.epoch, offset: 1 } } },
    });
    expect(t.messagesOf('c1')).toEqual([]);
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_history', identifier: pubsub('s') });
  });

  it('rejects history for an identifier the connection is not subscribed to', async () => {
    const t = await withMessages(1);
    await t.open('c1');
    await t.send('c1', { command: 'history', identifier: pubsub('s'), history: { since: 0 } });
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_history', identifier: pubsub('s') });
  });
});

describe('Gateway: session restore', () => {
  it('restores the subscriptions of the previous session: restored welcome with restored_ids', async () => {
    const t = setup({ publicStreams: true });
    await t.open('old');
    await t.subscribe('old', pubsub('a'));
    await t.subscribe('old', signedId('b'));
    await t.gateway.disconnect('old');
    await t.open('new', { query: { sid: 'sid-1' } });
    expect(t.frames('new')).toEqual([
      {
        type: 'welcome',
        sid: 'sid-2',
        restored: true,
        restored_ids: [pubsub('a'), signedId('b')],
      },
    ]);
    await t.publish('a', { live: true });
    expect(t.messagesOf('new')).toEqual([{ live: true }]);
    // The restored session is itself restorable.
    await t.gateway.disconnect('new');
    await t.open('newer', { query: { sid: 'sid-2' } });
    expect(t.frames('newer')[0]).toMatchObject({
      restored: true,
      restored_ids: [pubsub('a'), signedId('b')],
    });
  });

  it('restores at most LAMBDACABLE_MAX_SUBSCRIPTIONS, and a public name outside the prefix set since then no more', async () => {
    const t = setup({ publicStreams: true });
    await t.open('old');
    for (const s of ['a', 'b', 'public:c', 'public:d']) await t.subscribe('old', pubsub(s));
    await t.gateway.disconnect('old');
    const settings = t.config as { maxSubscriptions: number; publicStreamPrefix: string };
    settings.maxSubscriptions = 1;
    settings.publicStreamPrefix = 'public:';
    await t.open('new', { query: { sid: 'sid-1' } });
    const welcome = t.frames('new')[0] as { restored_ids: string[] };
    expect(welcome).toMatchObject({ type: 'welcome', restored: true });
    // a and b are no longer public; of c and d, one fits.
    expect(welcome.restored_ids).toHaveLength(1);
    expect([pubsub('public:c'), pubsub('public:d')]).toContain(welcome.restored_ids[0]);
    expect(await t.store.subscriptionsOf('new')).toHaveLength(1);
  });

  it('authorizes restored subscriptions again: a rotated-out streams secret or public streams turned off end them', async () => {
    const t = setup({ publicStreams: true });
    await t.open('old');
    await t.subscribe('old', pubsub('a'));
    await t.subscribe('old', signedId('b'));
    await t.subscribe('old', signedId('c'));
    await t.gateway.disconnect('old');
    // A redeploy between the two connections: public streams off, the streams secret rotated
    // with the old one kept as previous (b and c still verify).
    const settings = t.config as { publicStreams: boolean; streamsSecret?: string };
    settings.publicStreams = false;
    Object.assign(t.config, { streamsSecret: 'rotated-0123456789abcdef0123456789' });
    Object.assign(t.config, { streamsPreviousSecret: STREAMS_SECRET });
    await t.open('new', { query: { sid: 'sid-1' } });
    expect(t.frames('new')[0]).toMatchObject({
      restored: true,
      restored_ids: [signedId('b'), signedId('c')],
    });
    // Then the previous secret is dropped: signed names of the old secret end too.
    await t.gateway.disconnect('new');
    Object.assign(t.config, { streamsPreviousSecret: undefined });
    await t.open('newer', { query: { sid: 'sid-2' } });
    expect(t.frames('newer')).toEqual([
      { type: 'welcome', sid: 'sid-3', restored: true, restored_ids: [] },
    ]);
    await t.publish('a', 'plain');
    await t.publish('b', 'signed');
    expect(t.messagesOf('newer')).toEqual([]);
  });

  it('starts a fresh session for an empty, unknown or expired sid, or another identity', async () => {
    const t = setup({ publicStreams: true });
    await t.open('old');
    await t.subscribe('old', pubsub('a'));
    await t.gateway.disconnect('old');
    await t.open('empty', { query: { sid: '' } });
    await t.open('unknown', { query: { sid: 'nope' } });
    await t.open('other', { sub: 'mallory', query: { sid: 'sid-1' } });
    for (const c of ['empty', 'unknown', 'other']) {
      expect(t.frames(c)).toEqual([{ type: 'welcome', sid: expect.any(String) }]);
      expect(await t.store.subscriptionsOf(c)).toEqual([]);
    }
    t.clock.advanceSeconds(defaultBrokerConfig().sessionsTtl + 1);
    await t.open('late', { query: { sid: 'sid-1' } });
    expect(t.frames('late')).toEqual([{ type: 'welcome', sid: expect.any(String) }]);
  });

  it('never restores a plain actioncable-v1-json client', async () => {
    const t = setup({ publicStreams: true });
    await t.open('old');
    await t.subscribe('old', pubsub('a'));
    await t.gateway.disconnect('old');
    await t.open('plain', { protocols: PLAIN, query: { sid: 'sid-1' } });
    expect(t.frames('plain')).toEqual([{ type: 'welcome', sid: 'sid-2' }]);
    expect(await t.store.subscriptionsOf('plain')).toEqual([]);
  });
});

describe('Gateway: whispers', () => {
  it('reaches the other subscribers of the stream, never the sender, without a position', async () => {
    const t = setup({ publicStreams: true });
    for (const c of ['c1', 'c2', 'c3']) await t.open(c);
    await t.subscribe('c1', pubsub('room'));
    await t.subscribe('c2', pubsub('room'));
    await t.subscribe('c3', pubsub('elsewhere'));
    await t.send('c1', { command: 'whisper', identifier: pubsub('room'), data: { typing: true } });
    expect(t.frames('c2').at(-1)).toEqual({
      identifier: pubsub('room'),
      message: { typing: true },
    });
    expect(t.messagesOf('c1')).toEqual([]);
    expect(t.messagesOf('c3')).toEqual([]);
    // Not stored: a later history request does not return it.
    await t.send('c2', { command: 'history', identifier: pubsub('room'), history: { since: 0 } });
    expect(t.messagesOf('c2')).toEqual([{ typing: true }]);
  });

  it('is refused on signed streams unless enabled', async () => {
    for (const whisperOnSigned of [false, true]) {
      const t = setup({ whisperOnSigned });
      await t.open('c1');
      await t.open('c2');
      await t.subscribe('c1', signedId('room'));
      await t.subscribe('c2', signedId('room'));
      await t.send('c1', { command: 'whisper', identifier: signedId('room'), data: { hi: 1 } });
      expect(t.messagesOf('c2')).toEqual(whisperOnSigned ? [{ hi: 1 }] : []);
    }
  });
});

describe('Gateway: an identifier padded with other keys', () => {
  it('is refused, so a connection cannot hold a second paid copy of a stream', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    const signed = signStreamName('room', STREAMS_SECRET);
    const plain = JSON.stringify({ channel: '$pubsub', signed_stream_name: signed });
    const padded = JSON.stringify({ channel: '$pubsub', signed_stream_name: signed, x: 1 });
    await t.subscribe('c1', plain);
    await t.send('c1', { command: 'subscribe', identifier: padded });
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_subscription', identifier: padded });
    await t.broker.handleBroadcast({ stream: 'room', data: '"once"' });
    expect(t.messagesOf('c1')).toEqual(['once']);
  });
});

describe('Gateway: whispers reach only subscriptions that allow them', () => {
  it("does not deliver a plain-name subscriber's whisper to a signed subscription of the stream", async () => {
    const t = setup({ publicStreams: true, whisperOnSigned: false });
    for (const c of ['c1', 'c2', 'c3']) await t.open(c);
    await t.subscribe('c1', pubsub('room'));
    await t.subscribe('c2', signedId('room'));
    await t.subscribe('c3', pubsub('room'));
    await t.send('c1', { command: 'whisper', identifier: pubsub('room'), data: { typing: true } });
    expect(t.messagesOf('c3')).toEqual([{ typing: true }]);
    // c2 subscribed by signature, where whispers are off: it gets none.
    expect(t.messagesOf('c2')).toEqual([]);
  });
});

describe('Gateway: bad input', () => {
  it.each([
    ['a non-JSON frame', 'not json'],
    ['a frame without command', '{"identifier":"x"}'],
    ['an unknown command', '{"command":"dance","identifier":"x"}'],
    ['an oversize frame', JSON.stringify({ command: 'subscribe', identifier: 'x'.repeat(40_000) })],
    [
      'a message on an unknown identifier',
      JSON.stringify({ command: 'message', identifier: 'x', data: '{}' }),
    ],
    [
      'an unsubscribe of an unknown identifier',
      JSON.stringify({ command: 'unsubscribe', identifier: 'x' }),
    ],
    [
      'a whisper on an unknown identifier',
      JSON.stringify({ command: 'whisper', identifier: 'x', data: {} }),
    ],
  ])(
    'logs a rejection of %s, sends nothing and leaves other connections alone',
    async (_, frame) => {
      const t = setup({ publicStreams: true });
      await t.open('c1');
      await t.open('c2');
      await t.subscribe('c2', pubsub('s'));
      const before = t.frames('c1').length;
      const warnings = t.logger.warnings().length;
      await expect(t.gateway.receive('c1', frame)).resolves.toBeUndefined();
      expect(t.frames('c1')).toHaveLength(before);
      expect(t.logger.warnings().length).toBe(warnings + 1);
      expect(t.logger.warnings().at(-1)).toMatch(/^frame refused: /);
      await t.publish('s', { ok: true });
      expect(t.messagesOf('c2')).toEqual([{ ok: true }]);
      expect(await t.store.getConnection('c1')).toBeDefined();
    },
  );

  it('refuses the message command on $pubsub with a logged error', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1');
    await t.subscribe('c1', pubsub('s'));
    await t.send('c1', { command: 'message', identifier: pubsub('s'), data: '{"action":"x"}' });
    expect(t.logger.warnings().at(-1)).toBe('frame refused: channel $pubsub has no actions');
  });

  it('refuses the history command from a plain client as an unknown command', async () => {
    const t = setup({ publicStreams: true });
    await t.open('c1', { protocols: PLAIN });
    await t.subscribe('c1', pubsub('s'));
    await t.send('c1', { command: 'history', identifier: pubsub('s'), history: { since: 0 } });
    expect(t.logger.warnings().at(-1)).toMatch(/unknown command: history/);
  });

  it('ignores pongs', async () => {
    const t = setup();
    await t.open('c1');
    await t.send('c1', { command: 'pong' });
    expect(t.logger.warnings()).toEqual([]);
  });

  it('never throws when the store fails', async () => {
    const t = setup();
    await t.open('c1');
    t.store.getConnection = async () => {
      throw new Error('store down');
    };
    await expect(t.send('c1', { command: 'subscribe', identifier: 'x' })).resolves.toBeUndefined();
    expect(t.logger.entries.at(-1)).toMatchObject({ level: 'error', message: 'frame failed' });
  });
});

describe('Gateway: gone connections', () => {
  const paths = [
    ['a broadcast', (t: ReturnType<typeof setup>) => t.publish('s', { n: 1 })],
    [
      'a whisper',
      (t: ReturnType<typeof setup>) =>
        t.send('c1', { command: 'whisper', identifier: pubsub('s'), data: { typing: true } }),
    ],
    // A ping answered 410: test/unit/realtime/keepalive/pinger.test.ts.
  ] as const;

  it.each(paths)(
    'leaves a connection that answers 410 to %s alone while it is young, then disconnects it',
    async (_, deliver) => {
      const t = setup({ publicStreams: true });
      await t.open('c1');
      await t.open('c2');
      await t.subscribe('c1', pubsub('s'));
      await t.subscribe('c2', pubsub('s'));
      t.api.markGone('c2');
      await deliver(t);
      expect(await t.store.getConnection('c2')).toBeDefined();
      expect(await t.store.subscriptionsOf('c2')).toHaveLength(1);

      t.clock.advanceSeconds(11);
      await deliver(t);
      expect(await t.store.getConnection('c2')).toBeUndefined();
      expect(await t.store.subscriptionsOf('c2')).toEqual([]);
      // Disconnected as by $disconnect: the session is finished, so it expires.
      t.clock.advanceSeconds(defaultBrokerConfig().sessionsTtl - 1);
      expect(await t.broker.restoreSession('sid-2')).not.toBeNull();
      t.clock.advanceSeconds(2);
      expect(await t.broker.restoreSession('sid-2')).toBeNull();
      expect(await t.broker.restoreSession('sid-1')).not.toBeNull();
      expect(await t.store.getConnection('c1')).toBeDefined();
    },
  );

  it('removes the leftover subscriptions of a connection that is already gone from the store', async () => {
    const t = setup({ publicStreams: true });
    await t.store.addSubscription({ connectionId: 'ghost', stream: 's', identifier: pubsub('s') });
    t.api.markGone('ghost');
    await t.publish('s', { n: 1 });
    expect(await t.store.subscriptionsOf('ghost')).toEqual([]);
  });
});
