import { describe, expect, it } from 'vitest';
import {
  composeRealtime,
  createConnectToken,
  defaultGatewayConfig,
  MAX_PRESENCE_INFO_BYTES,
  presenceOf,
} from '../../../../lib/core';
import {
  MemoryBroker,
  MemoryConnectionApi,
  MemoryConnectionStore,
  MemorySessionCache,
} from '../../../../lib/testing';
import { FakeClock } from '../../../helpers/clock';
import { EXT, gatewayHarness, JWT_SECRET, pubsub } from '../../../helpers/gateway';

const TTL_MS = 15_000;

/**
 * A gateway with presence over memory stores. The store's changes go where the outbox takes
 * them in production: the broadcast consumer's `handleBroadcast` of their `presence` message,
 * which the fan-out posts to every subscriber with its own identifier.
 */
function setup(options: { rateLimit?: boolean } = {}) {
  const t = gatewayHarness({
    config: { publicStreams: true },
    presence: { ttlMs: TTL_MS },
    ...(options.rateLimit ? { rateLimit: { rate: 1, burst: 2 } } : {}),
  });
  /** Each connection's identity is its id. */
  const open = async (connectionId: string) => {
    await t.open(connectionId, { sub: connectionId });
  };
  /** Frames after the welcome and confirmations: what presence sent. */
  const presenceFrames = (connectionId: string) =>
    t.frames(connectionId).filter((f) => f.type === 'presence');
  const warnings = () => t.logger.warnings().join('\n');
  return { ...t, open, presenceFrames, warnings };
}

const room = pubsub('room');
/** The same stream through another identifier spelling: another subscriber's own identifier. */
const roomToo = JSON.stringify({ stream_name: 'room', channel: '$pubsub' });

describe('Gateway: presence (join, leave, presence)', () => {
  it('sends a join to every subscriber with its own identifier, once per id', async () => {
    const t = setup();
    await t.open('a');
    await t.open('b');
    await t.send('a', { command: 'subscribe', identifier: room });
    await t.send('b', { command: 'subscribe', identifier: roomToo });
    await t.send('a', {
      command: 'join',
      identifier: room,
      presence: { id: 'alice', info: { name: 'Alice' } },
    });
    const join = { type: 'join', id: 'alice', info: { name: 'Alice' } };
    expect(t.presenceFrames('a')).toEqual([{ type: 'presence', identifier: room, message: join }]);
    expect(t.presenceFrames('b')).toEqual([
      { type: 'presence', identifier: roomToo, message: join },
    ]);
    // The same id from a second connection is a second session: no join for anyone.
    await t.send('b', { command: 'join', identifier: roomToo, presence: { id: 'alice' } });
    expect(t.presenceFrames('a')).toHaveLength(1);
    expect(t.presenceFrames('b')).toHaveLength(1);
  });

  it('answers presence with the members, total exact, and sends leave only for the last session', async () => {
    const t = setup();
    for (const c of ['a', 'b', 'c']) {
      await t.open(c);
      await t.send(c, { command: 'subscribe', identifier: room });
    }
    await t.send('a', { command: 'join', identifier: room, presence: { id: 'alice', info: 1 } });
    await t.send('b', { command: 'join', identifier: room, presence: { id: 'alice', info: 2 } });
    await t.send('c', { command: 'join', identifier: room, presence: { id: 'carol' } });
    await t.send('c', { command: 'presence', identifier: room, data: {} });
    expect(t.presenceFrames('c').at(-1)).toEqual({
      type: 'presence',
      identifier: room,
      message: {
        type: 'info',
        total: 2,
        records: [{ id: 'alice', info: 2 }, { id: 'carol' }],
      },
    });
    const before = t.presenceFrames('c').length;
    await t.send('a', { command: 'leave', identifier: room });
    expect(t.presenceFrames('c')).toHaveLength(before); // b is still alice
    await t.send('b', { command: 'unsubscribe', identifier: room }); // unsubscribe leaves too
    expect(t.presenceFrames('c').at(-1)).toEqual({
      type: 'presence',
      identifier: room,
      message: { type: 'leave', id: 'alice' },
    });
    expect((await presenceOf(t.presenceStore, 'room')).total).toBe(1);
  });

  it('joins with the presence a subscribe carries (a client resubscribing)', async () => {
    const t = setup();
    await t.open('a');
    await t.send('a', { command: 'subscribe', identifier: room, presence: { id: 'alice' } });
    expect(t.presenceFrames('a')).toEqual([
      { type: 'presence', identifier: room, message: { type: 'join', id: 'alice' } },
    ]);
  });

  it('keeps a dropped connection present for the TTL, then the pinger sends its leave', async () => {
    const t = setup();
    await t.open('a');
    await t.open('b');
    await t.send('a', { command: 'subscribe', identifier: room });
    await t.send('b', { command: 'subscribe', identifier: room });
    await t.send('a', { command: 'join', identifier: room, presence: { id: 'alice' } });
    await t.gateway.disconnect('a');
    const pinger = t.realtime.pinger({ defaultInterval: 3 });
    await pinger.tick();
    t.clock.advance(TTL_MS - 1);
    await pinger.tick();
    await Promise.all(t.delivered.splice(0));
    expect(t.changes.map((c) => c.type)).toEqual(['join']);
    // Due now, but the last expiry ran 1 ms ago: expiries are 1 s apart (their Queries).
    t.clock.advance(1);
    await pinger.tick();
    await Promise.all(t.delivered.splice(0));
    expect(t.changes.map((c) => c.type)).toEqual(['join']);
    t.clock.advance(999);
    await pinger.tick();
    await Promise.all(t.delivered.splice(0));
    expect(t.presenceFrames('b').at(-1)).toEqual({
      type: 'presence',
      identifier: room,
      message: { type: 'leave', id: 'alice' },
    });
  });

  it('expires a backlog on every tick while an expiry takes its full 100', async () => {
    const t = setup();
    await t.open('b');
    await t.send('b', { command: 'subscribe', identifier: room });
    const dropped = Array.from({ length: 250 }, (_, n) => `c${n}`);
    for (const id of dropped) {
      await t.open(id);
      await t.send(id, { command: 'subscribe', identifier: room });
      await t.send(id, { command: 'join', identifier: room, presence: { id } });
      await t.gateway.disconnect(id);
    }
    t.clock.advance(TTL_MS);
    const pinger = t.realtime.pinger({ defaultInterval: 3 });
    const leaves = () => t.changes.filter((c) => c.type === 'leave').length;
    const counts: number[] = [];
    for (let tick = 0; tick < 4; tick++) {
      await pinger.tick();
      counts.push(leaves());
      t.clock.advance(250);
    }
    expect(counts).toEqual([100, 200, 250, 250]);
  });

  /** a and b subscribed to room; a joins as alice while its `$disconnect` runs at `when`. */
  async function joinRacingDisconnect(when: 'before the join writes' | 'after the join writes') {
    const t = setup();
    await t.open('a');
    await t.open('b');
    await t.send('a', { command: 'subscribe', identifier: room });
    await t.send('b', { command: 'subscribe', identifier: room });
    const join = t.presenceStore.join.bind(t.presenceStore);
    t.presenceStore.join = async (...args) => {
      if (when === 'before the join writes') await t.gateway.disconnect('a');
      const joined = await join(...args);
      if (when === 'after the join writes') await t.gateway.disconnect('a');
      return joined;
    };
    await t.send('a', { command: 'join', identifier: room, presence: { id: 'alice' } });
    return t;
  }

  it("leaves no session of a join whose connection's $disconnect overtook it (the frames queue and $disconnect are not ordered)", async () => {
    // The join's frame read the connection; then `$disconnect` ran whole before the join wrote.
    const t = await joinRacingDisconnect('before the join writes');
    await Promise.all(t.delivered.splice(0));
    expect((await presenceOf(t.presenceStore, 'room', { nowMs: t.clock.now() })).total).toBe(0);
    // Its subscribers saw it come and go; the sender was told nothing (it is gone).
    expect(t.presenceFrames('b').map((f) => (f.message as { type: string }).type)).toEqual([
      'join',
      'leave',
    ]);
    expect(t.warnings()).toContain('presence join taken back: the connection ended meanwhile');
  });

  it("drops the session of a join stored just before its connection's $disconnect, with a leave after the TTL", async () => {
    // The join wrote; then `$disconnect` ran whole before the join read the connection again.
    const t = await joinRacingDisconnect('after the join writes');
    const pinger = t.realtime.pinger({ defaultInterval: 3 });
    t.clock.advance(TTL_MS);
    await pinger.tick();
    await Promise.all(t.delivered.splice(0));
    expect((await presenceOf(t.presenceStore, 'room', { nowMs: t.clock.now() })).total).toBe(0);
    expect(t.presenceFrames('b').map((f) => (f.message as { type: string }).type)).toEqual([
      'join',
      'leave',
    ]);
  });

  it("takes a restored client's re-sent join as no second join, and its old connection's expiry as no leave", async () => {
    const t = setup();
    await t.open('old');
    await t.open('b');
    await t.send('old', { command: 'subscribe', identifier: room });
    await t.send('b', { command: 'subscribe', identifier: room });
    await t.send('old', { command: 'join', identifier: room, presence: { id: 'alice' } });
    await t.gateway.disconnect('old');
    await t.open('new');
    await t.send('new', { command: 'subscribe', identifier: room });
    await t.send('new', { command: 'join', identifier: room, presence: { id: 'alice' } });
    t.clock.advance(TTL_MS);
    await t.realtime.pinger({ defaultInterval: 3 }).tick();
    await Promise.all(t.delivered.splice(0));
    expect(t.changes.map((c) => `${c.type} ${c.id}`)).toEqual(['join alice']);
    expect(t.presenceFrames('b')).toHaveLength(1);
  });

  it('leaves the presence of the subscriptions a remote unsubscribe removes', async () => {
    const t = setup();
    await t.open('a');
    await t.open('b');
    await t.send('a', { command: 'subscribe', identifier: room });
    await t.send('b', { command: 'subscribe', identifier: room });
    await t.send('a', { command: 'join', identifier: room, presence: { id: 'alice' } });
    await t.send('b', { command: 'join', identifier: room, presence: { id: 'bob' } });
    await t.realtime.broker.handleCommand({ command: 'unsubscribe', payload: { stream: 'room' } });
    await Promise.all(t.delivered.splice(0));
    expect(t.changes.map((c) => `${c.type} ${c.id}`).sort()).toEqual([
      'join alice',
      'join bob',
      'leave alice',
      'leave bob',
    ]);
    expect((await presenceOf(t.presenceStore, 'room')).total).toBe(0);
  });

  describe('refusals go to the sender alone', () => {
    it.each([
      [
        'an info over 1 KB',
        { id: 'alice', info: 'x'.repeat(MAX_PRESENCE_INFO_BYTES) },
        'info_too_large',
      ],
      ['an id over 128 bytes', { id: 'a'.repeat(129) }, 'id_too_long'],
      ['a presence that is not an object', 'alice', 'malformed'],
      ['a presence without an id', { info: {} }, 'no_id'],
    ])(
      '%s: a presence error, nothing stored or sent to others',
      async (_what, presence, reason) => {
        const t = setup();
        await t.open('a');
        await t.open('b');
        await t.send('a', { command: 'subscribe', identifier: room });
        await t.send('b', { command: 'subscribe', identifier: room });
        await t.send('a', { command: 'join', identifier: room, presence });
        expect(t.presenceFrames('a')).toEqual([
          { type: 'presence', identifier: room, message: { type: 'error', reason } },
        ]);
        expect(t.presenceFrames('b')).toEqual([]);
        expect(t.changes).toEqual([]);
        expect(t.warnings()).toContain('presence join refused');
      },
    );

    it('a join or presence on an identifier the connection is not subscribed to: error, nothing joined', async () => {
      const t = setup();
      await t.open('a');
      await t.send('a', { command: 'join', identifier: room, presence: { id: 'alice' } });
      await t.send('a', { command: 'presence', identifier: room, data: {} });
      expect(t.presenceFrames('a')).toEqual([
        {
          type: 'presence',
          identifier: room,
          message: { type: 'error', reason: 'not_subscribed' },
        },
        {
          type: 'presence',
          identifier: room,
          message: { type: 'error', reason: 'not_subscribed' },
        },
      ]);
      expect((await presenceOf(t.presenceStore, 'room')).total).toBe(0);
    });

    it('a leave of a connection not present: no frame to anyone, logged', async () => {
      const t = setup();
      await t.open('a');
      await t.open('b');
      await t.send('a', { command: 'subscribe', identifier: room });
      await t.send('b', { command: 'subscribe', identifier: room });
      await t.send('b', { command: 'join', identifier: room, presence: { id: 'bob' } });
      await t.send('a', { command: 'leave', identifier: room, presence: { id: 'bob' } });
      expect(t.presenceFrames('a')).toHaveLength(1); // bob's join only
      expect(t.changes.map((c) => c.type)).toEqual(['join']);
      expect(t.warnings()).toContain('not present on this stream');
    });

    it('a join or presence over the rate limit: a presence error', async () => {
      const t = setup({ rateLimit: true });
      await t.open('a');
      await t.send('a', { command: 'subscribe', identifier: room });
      await t.send('a', { command: 'presence', identifier: room, data: {} });
      await t.send('a', { command: 'join', identifier: room, presence: { id: 'alice' } });
      expect(t.presenceFrames('a')).toEqual([
        { type: 'presence', identifier: room, message: { type: 'info', total: 0, records: [] } },
        {
          type: 'presence',
          identifier: room,
          message: { type: 'error', reason: 'too_many_requests' },
        },
      ]);
    });
  });

  it('answers every presence command with an error when presence is off', async () => {
    const clock = new FakeClock();
    const api = new MemoryConnectionApi();
    const sessions = new MemorySessionCache({ clock });
    const { gateway } = composeRealtime(
      {
        store: new MemoryConnectionStore(),
        api,
        sessions,
        clock,
        config: {
          ...defaultGatewayConfig(),
          jwtSecret: JWT_SECRET,
          publicStreams: true,
          publicStreamPrefix: '',
        },
      },
      (broadcaster) => new MemoryBroker({ broadcaster, sessions, clock }),
    );
    const jid = await createConnectToken({ sub: 'a', ttlSeconds: 600 }, JWT_SECRET, clock);
    await gateway.connect({ connectionId: 'a', query: { jid }, protocols: EXT });
    await gateway.welcome('a');
    await gateway.receive('a', JSON.stringify({ command: 'subscribe', identifier: room }));
    await gateway.receive('a', JSON.stringify({ command: 'presence', identifier: room }));
    await gateway.receive(
      'a',
      JSON.stringify({ command: 'join', identifier: room, presence: { id: 'x' } }),
    );
    const errors = (api.framesOf('a') as Record<string, unknown>[]).filter(
      (f) => f.type === 'presence',
    );
    expect(errors).toEqual([
      {
        type: 'presence',
        identifier: room,
        message: { type: 'error', reason: 'presence_disabled' },
      },
      {
        type: 'presence',
        identifier: room,
        message: { type: 'error', reason: 'presence_disabled' },
      },
    ]);
  });
});
