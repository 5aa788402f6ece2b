import { describe, expect, it } from 'vitest';
import { ConfigError, configFromEnv, type RateLimit } from '../../../../lib/core';
import { gatewayHarness, pubsub } from '../../../helpers/gateway';

/** A gateway over a memory rate limiter of `limit` (`null`: none). */
function setup(limit: RateLimit | null = { rate: 1, burst: 3 }) {
  const t = gatewayHarness({
    config: { publicStreams: true },
    ...(limit ? { rateLimit: limit } : {}),
  });
  const open = async (connectionId: string) => {
    await t.open(connectionId);
  };
  /** What the limit refused, as logged. */
  const refusals = () => t.logger.at('warn').filter((e) => /rate limit|too many/.test(e.message));
  return { ...t, open, refusals };
}

describe('Gateway: per-connection rate limit', () => {
  it('answers a subscribe over the limit with reject_subscription and subscribes nothing', async () => {
    const t = setup();
    await t.open('c1');
    for (const s of ['a', 'b', 'c', 'd']) await t.subscribe('c1', pubsub(s));
    expect(t.frames('c1').slice(1)).toEqual([
      { type: 'confirm_subscription', identifier: pubsub('a') },
      { type: 'confirm_subscription', identifier: pubsub('b') },
      { type: 'confirm_subscription', identifier: pubsub('c') },
      { type: 'reject_subscription', identifier: pubsub('d') },
    ]);
    expect((await t.store.subscriptionsOf('c1')).map((s) => s.stream).sort()).toEqual([
      'a',
      'b',
      'c',
    ]);
    expect(t.gateway.takeCounts()).toEqual({ rateLimitedFrames: 1, floodDisconnects: 0 });
    expect(t.gateway.takeCounts()).toEqual({ rateLimitedFrames: 0, floodDisconnects: 0 });
  });

  it('drops, never rejects, a re-sent subscribe over the limit of a subscription the connection holds', async () => {
    const t = setup({ rate: 1, burst: 2 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('a'));
    await t.subscribe('c1', pubsub('b'));
    // The client re-sends a subscribe it got no answer to in time; the bucket is empty.
    await t.subscribe('c1', pubsub('a'));
    expect(t.frames('c1').slice(3)).toEqual([]);
    expect((await t.store.subscriptionsOf('c1')).map((s) => s.stream).sort()).toEqual(['a', 'b']);
    expect(t.refusals().map((e) => e.message)).toEqual([
      'frame refused: rate limit: repeated subscribe dropped, the subscription is held (1 refused in a row)',
    ]);
  });

  it('answers a history request over the limit with reject_history and replays nothing', async () => {
    const t = setup({ rate: 1, burst: 2 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('room'));
    const history = { command: 'history', identifier: pubsub('room'), history: { since: 0 } };
    await t.send('c1', history);
    await t.send('c1', history);
    expect(t.frames('c1').slice(2)).toEqual([
      { type: 'confirm_history', identifier: pubsub('room') },
      { type: 'reject_history', identifier: pubsub('room') },
    ]);
  });

  it('drops a whisper over the limit: the other subscribers never get it, and it is counted', async () => {
    const t = setup({ rate: 1, burst: 2 });
    await t.open('c1');
    await t.open('c2');
    await t.subscribe('c2', pubsub('room'));
    await t.subscribe('c1', pubsub('room'));
    for (let n = 1; n <= 3; n++) await t.whisper('c1', pubsub('room'), { n });
    expect(t.frames('c2').filter((f) => f.type === undefined)).toEqual([
      { identifier: pubsub('room'), message: { n: 1 } },
    ]);
    expect(t.frames('c1').slice(2)).toEqual([]);
    expect(t.gateway.takeCounts()).toEqual({ rateLimitedFrames: 2, floodDisconnects: 0 });
  });

  it('drops a message over the limit without an answer', async () => {
    const t = setup({ rate: 1, burst: 1 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('room'));
    await t.send('c1', { command: 'message', identifier: pubsub('room'), data: '{"action":"x"}' });
    expect(t.frames('c1')).toHaveLength(2);
    expect(t.refusals().map((e) => e.fields?.command)).toEqual(['message']);
  });

  it('logs each refusal once, with the connection, the command and the clipped identifier', async () => {
    const t = setup({ rate: 1, burst: 1 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('a'));
    const long = pubsub('x'.repeat(2000));
    await t.subscribe('c1', long);
    const logged = t.refusals();
    expect(logged).toHaveLength(1);
    expect(logged[0]!.message).toMatch(/^frame refused: rate limit: subscribe rejected/);
    expect(logged[0]!.fields).toMatchObject({ connectionId: 'c1', command: 'subscribe' });
    expect(String(logged[0]!.fields?.identifier).length).toBeLessThan(long.length);
  });

  it('disconnects a connection whose refusals in a row exceed the burst: disconnect too_many_requests without reconnect, then closes it, once', async () => {
    const t = setup({ rate: 1, burst: 3 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('room'));
    // 2 tokens left, then 3 refusals are tolerated; the 4th in a row is the flood.
    for (let n = 0; n < 5; n++) await t.whisper('c1', pubsub('room'));
    expect(t.api.isClosed('c1')).toBe(false);
    await t.whisper('c1', pubsub('room'));
    expect(t.frames('c1').at(-1)).toEqual({
      type: 'disconnect',
      reason: 'too_many_requests',
      reconnect: false,
    });
    expect(t.api.isClosed('c1')).toBe(true);
    await t.whisper('c1', pubsub('room'));
    expect(t.api.closes).toHaveLength(1);
    expect(t.gateway.takeCounts()).toEqual({ rateLimitedFrames: 5, floodDisconnects: 1 });
    expect(t.refusals().filter((e) => /too many requests/.test(e.message))).toHaveLength(1);
  });

  it('forgives refusals once a frame gets through: a client that waits for its tokens stays connected', async () => {
    const t = setup({ rate: 1, burst: 2 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('room'));
    for (let round = 0; round < 5; round++) {
      // One token, then two refusals (the burst) each second: never more in a row.
      for (let n = 0; n < 3; n++) await t.whisper('c1', pubsub('room'));
      t.clock.advance(1000);
    }
    expect(t.api.isClosed('c1')).toBe(false);
    expect(t.frames('c1').some((f) => f.type === 'disconnect')).toBe(false);
  });

  it('refills at the rate: a subscribe refused now is confirmed a token later', async () => {
    const t = setup({ rate: 2, burst: 1 });
    await t.open('c1');
    await t.subscribe('c1', pubsub('a'));
    await t.subscribe('c1', pubsub('b'));
    t.clock.advance(500);
    await t.subscribe('c1', pubsub('b'));
    expect(t.frames('c1').slice(1)).toEqual([
      { type: 'confirm_subscription', identifier: pubsub('a') },
      { type: 'reject_subscription', identifier: pubsub('b') },
      { type: 'confirm_subscription', identifier: pubsub('b') },
    ]);
  });

  it('keeps connections apart and never limits unsubscribe or pong', async () => {
    const t = setup({ rate: 1, burst: 1 });
    await t.open('c1');
    await t.open('c2');
    await t.subscribe('c1', pubsub('a'));
    for (let n = 0; n < 5; n++) await t.send('c1', { command: 'pong' });
    await t.send('c1', { command: 'unsubscribe', identifier: pubsub('a') });
    await t.subscribe('c2', pubsub('a'));
    expect(t.frames('c2').at(-1)).toEqual({
      type: 'confirm_subscription',
      identifier: pubsub('a'),
    });
    expect(await t.store.subscriptionsOf('c1')).toEqual([]);
    expect(t.refusals()).toEqual([]);
  });

  it('refuses nothing without a rate limiter (LAMBDACABLE_RATE_LIMIT=0)', async () => {
    const t = setup(null);
    await t.open('c1');
    for (let n = 0; n < 100; n++) await t.subscribe('c1', pubsub(`s${n}`));
    expect(t.frames('c1').filter((f) => f.type === 'confirm_subscription')).toHaveLength(100);
    expect(t.gateway.takeCounts()).toEqual({ rateLimitedFrames: 0, floodDisconnects: 0 });
  });
});

describe('configFromEnv: the rate limit', () => {
  it('defaults to 10 tokens per second and a burst of 50; 0 turns the limit off', () => {
    expect(configFromEnv({})).toMatchObject({ rateLimit: 10, rateBurst: 50 });
    expect(configFromEnv({ LAMBDACABLE_RATE_LIMIT: '0' }).rateLimit).toBe(0);
    expect(configFromEnv({ LAMBDACABLE_RATE_LIMIT: '0.5' }).rateLimit).toBe(0.5);
    expect(() => configFromEnv({ LAMBDACABLE_RATE_BURST: '0' })).toThrow(ConfigError);
  });
});
