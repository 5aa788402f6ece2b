import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  type GatewayConfig,
  MAX_IDENTIFIER_BYTES,
  MAX_SID_BYTES,
  MAX_STREAM_BYTES,
  signStreamName,
} from '../../../../lib/core';
import { FakeClock } from '../../../helpers/clock';
import {
  EXT,
  gatewayHarness,
  JWT_SECRET,
  pubsub,
  STREAMS_SECRET,
  signedId,
} from '../../../helpers/gateway';

/** Public streams on, sids that say they are secret (they must never be logged). */
function setup(config: Partial<GatewayConfig> = {}) {
  const t = gatewayHarness({
    clock: new FakeClock(1_700_000_000_000),
    sidPrefix: 'sid-secret-',
    config: { publicStreams: true, ...config },
  });
  const open = (connectionId: string, query: Record<string, string> = {}) =>
    t.open(connectionId, { query });
  return { ...t, open };
}

describe('Gateway input: stream names and identifiers become keys', () => {
  it(`rejects a stream name over ${MAX_STREAM_BYTES} bytes (UTF-8), public or signed`, async () => {
    const t = setup();
    await t.open('c1');
    const long = 'é'.repeat(MAX_STREAM_BYTES / 2 + 1); // 258 bytes, 129 characters
    for (const identifier of [pubsub(long), signedId(long)]) {
      await t.send('c1', { command: 'subscribe', identifier });
      expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_subscription', identifier });
    }
    expect(await t.store.subscriptionsOf('c1')).toEqual([]);
    expect(t.logger.at('error')).toEqual([]);
    expect(t.logger.at('warn').map((e) => e.message)).toContainEqual(
      expect.stringContaining(`the limit is ${MAX_STREAM_BYTES}`),
    );
  });

  it('accepts a stream name of exactly the limit, signed, and its identifier fits', async () => {
    const t = setup();
    await t.open('c1');
    const identifier = signedId('s'.repeat(MAX_STREAM_BYTES));
    expect(Buffer.byteLength(identifier)).toBeLessThanOrEqual(MAX_IDENTIFIER_BYTES);
    await t.send('c1', { command: 'subscribe', identifier });
    expect(t.frames('c1').at(-1)).toEqual({ type: 'confirm_subscription', identifier });
  });

  it(`rejects an identifier over ${MAX_IDENTIFIER_BYTES} bytes`, async () => {
    const t = setup();
    await t.open('c1');
    const identifier = JSON.stringify({
      channel: '$pubsub',
      stream_name: 'chat',
      pad: 'x'.repeat(MAX_IDENTIFIER_BYTES),
    });
    await t.send('c1', { command: 'subscribe', identifier });
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_subscription', identifier });
  });
});

describe('Gateway input: sid', () => {
  it(`starts a new session for a sid over ${MAX_SID_BYTES} bytes, with a WARN`, async () => {
    const t = setup();
    const restore = async (sid: string) => t.sessions.restoreSession(sid);
    let asked = '';
    t.sessions.restoreSession = async (sid: string) => {
      asked = sid;
      return restore(sid);
    };
    expect(await t.open('c1', { sid: 'x'.repeat(3000) })).toEqual({
      statusCode: 200,
      protocol: EXT,
    });
    expect(t.frames('c1')).toEqual([{ type: 'welcome', sid: 'sid-secret-1' }]);
    expect(asked).toBe('');
    expect(t.logger.at('warn').map((e) => e.message)).toContain(
      'session not restored: sid too long',
    );
  });

  it('never logs a sid or a signed identifier at INFO or above', async () => {
    const t = setup();
    await t.open('c1');
    const identifier = signedId('secret-room');
    await t.send('c1', { command: 'subscribe', identifier });
    await t.send('c1', { command: 'message', identifier, data: '{}' });
    await t.send('c1', { command: 'history', identifier: signedId('other'), history: {} });
    const signed = signStreamName('secret-room', STREAMS_SECRET);
    expect(t.logger.visible()).not.toContain('sid-secret-1');
    expect(t.logger.visible()).not.toContain(signed);
    expect(t.logger.visible()).not.toContain(signStreamName('other', STREAMS_SECRET));
    expect(t.logger.at('warn').length).toBeGreaterThan(0);
  });
});

describe('Gateway input: history positions', () => {
  it.each([
    ['a fractional offset', { epoch: 'e', offset: 1.5 }],
    ['a negative offset', { epoch: 'e', offset: -1 }],
    ['a string offset', { epoch: 'e', offset: '3' }],
    ['a numeric epoch', { epoch: 7, offset: 1 }],
    ['an empty epoch', { epoch: '', offset: 1 }],
    ['a position that is no object', 5],
  ])('answers %s with reject_history and a WARN, never an ERROR', async (_, position) => {
    const t = setup();
    await t.open('c1');
    const identifier = pubsub('chat');
    await t.send('c1', { command: 'subscribe', identifier });
    await t.send('c1', {
      command: 'history',
      identifier,
      history: { streams: { chat: position } },
    });
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_history', identifier });
    expect(t.logger.at('error')).toEqual([]);
    expect(t.logger.at('warn').map((e) => e.message)).toContainEqual(
      expect.stringContaining('history rejected'),
    );
  });

  it('answers a non-numeric since with reject_history', async () => {
    const t = setup();
    await t.open('c1');
    const identifier = pubsub('chat');
    await t.send('c1', { command: 'subscribe', identifier });
    await t.send('c1', { command: 'history', identifier, history: { since: 'yesterday' } });
    expect(t.frames('c1').at(-1)).toEqual({ type: 'reject_history', identifier });
  });

  it('still serves a valid position after a rejected one', async () => {
    const t = setup();
    await t.open('c1');
    const identifier = pubsub('chat');
    await t.send('c1', { command: 'subscribe', identifier });
    await t.broker.handleBroadcast({ stream: 'chat', data: '"one"' });
    const live = t.frames('c1').at(-1) as { epoch: string };
    await t.send('c1', {
      command: 'history',
      identifier,
      history: { streams: { chat: { epoch: live.epoch, offset: 0.5 } } },
    });
    await t.send('c1', {
      command: 'history',
      identifier,
      history: { streams: { chat: { epoch: live.epoch, offset: 0 } } },
    });
    expect(t.frames('c1').slice(-2)).toEqual([
      { identifier, message: 'one', stream_id: 'chat', epoch: live.epoch, offset: 1 },
      { type: 'confirm_history', identifier },
    ]);
  });
});

describe('Gateway input: what a refused frame logs', () => {
  it('clips client-controlled text to 200 characters per field, with its size', async () => {
    const t = setup();
    await t.open('c1');
    const huge = 'x'.repeat(30_000);
    await t.send('c1', { command: huge, identifier: pubsub('chat') });
    await t.send('c1', { command: 'subscribe', identifier: huge });
    await t.send('c1', {
      command: 'history',
      identifier: pubsub('chat'),
      history: { since: huge },
    });
    const warnings = t.logger.at('warn');
    expect(warnings.length).toBeGreaterThanOrEqual(3);
    for (const entry of warnings) {
      const size = JSON.stringify(entry).length;
      expect(size, JSON.stringify(entry).slice(0, 300)).toBeLessThan(1_500);
    }
    expect(JSON.stringify(warnings)).toContain('… (30000 bytes)');
  });
});

describe('Gateway input: streams named like Object.prototype members', () => {
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty'])(
    'serves history of a stream named %s, by since and by its own position',
    async (stream) => {
      const t = setup();
      await t.open('c1');
      const identifier = pubsub(stream);
      await t.send('c1', { command: 'subscribe', identifier });
      await t.broker.handleBroadcast({ stream, data: '"one"' });
      const live = t.frames('c1').at(-1) as { epoch: string };
      await t.send('c1', { command: 'history', identifier, history: { since: 0 } });
      expect(t.frames('c1').at(-1)).toEqual({ type: 'confirm_history', identifier });
      const positions = JSON.parse(`{"${stream}":{"epoch":"${live.epoch}","offset":0}}`);
      await t.send('c1', { command: 'history', identifier, history: { streams: positions } });
      expect(t.frames('c1').slice(-2)).toEqual([
        { identifier, message: 'one', stream_id: stream, epoch: live.epoch, offset: 1 },
        { type: 'confirm_history', identifier },
      ]);
    },
  );
});

describe('Gateway input: key rotation (current and previous key)', () => {
  const OLD = 'old-jwt-secret-0123456789abcdef0123';
  const NEW = 'new-jwt-secret-0123456789abcdef0123';
  const now = 1_700_000_000;

  async function connectWith(secretSigning: string, config: Partial<GatewayConfig>) {
    const t = setup(config);
    const jid = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('alice')
      .setExpirationTime(now + 600)
      .sign(new TextEncoder().encode(secretSigning));
    await t.gateway.connect({ connectionId: 'c1', query: { jid }, protocols: EXT });
    await t.gateway.welcome('c1');
    return t.frames('c1')[0] as { type: string };
  }

  it('accepts tokens of the old key, then of both during the rotation, then only of the new key', async () => {
    // Before: the old key only.
    expect((await connectWith(OLD, { jwtSecret: OLD })).type).toBe('welcome');
    expect((await connectWith(NEW, { jwtSecret: OLD })).type).toBe('disconnect');
    // During: the new key is current, the old one previous; both verify.
    const both = { jwtSecret: NEW, jwtPreviousSecret: OLD };
    expect((await connectWith(NEW, both)).type).toBe('welcome');
    expect((await connectWith(OLD, both)).type).toBe('welcome');
    expect((await connectWith('a-third-key-0123456789abcdef0123', both)).type).toBe('disconnect');
    // After: the previous key unset, old tokens are refused.
    expect((await connectWith(OLD, { jwtSecret: NEW })).type).toBe('disconnect');
    expect((await connectWith(NEW, { jwtSecret: NEW })).type).toBe('welcome');
  });

  it('verifies signed stream names of the old key, of both during the rotation, then only of the new key', async () => {
    const OLD_STREAMS = 'old-streams-secret-0123456789abcdef';
    const NEW_STREAMS = 'new-streams-secret-0123456789abcdef';
    const id = (secret: string) =>
      JSON.stringify({ channel: '$pubsub', signed_stream_name: signStreamName('room', secret) });
    const answer = async (config: Partial<GatewayConfig>, secret: string) => {
      const t = setup(config);
      await t.open('c1');
      await t.send('c1', { command: 'subscribe', identifier: id(secret) });
      return (t.frames('c1').at(-1) as { type: string }).type;
    };
    expect(await answer({ streamsSecret: OLD_STREAMS }, OLD_STREAMS)).toBe('confirm_subscription');
    const both = { streamsSecret: NEW_STREAMS, streamsPreviousSecret: OLD_STREAMS };
    expect(await answer(both, OLD_STREAMS)).toBe('confirm_subscription');
    expect(await answer(both, NEW_STREAMS)).toBe('confirm_subscription');
    expect(await answer({ streamsSecret: NEW_STREAMS }, OLD_STREAMS)).toBe('reject_subscription');
  });
});

describe('Gateway input: token age (LAMBDACABLE_JWT_MAX_AGE)', () => {
  const now = 1_700_000_000;
  const sign = (claims: { iat?: number; exp: number }) => {
    const jwt = new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alice');
    if (claims.iat !== undefined) jwt.setIssuedAt(claims.iat);
    return jwt.setExpirationTime(claims.exp).sign(new TextEncoder().encode(JWT_SECRET));
  };
  async function firstFrame(jid: string, jwtMaxAge?: number) {
    const t = setup(jwtMaxAge === undefined ? {} : { jwtMaxAge });
    await t.gateway.connect({ connectionId: 'c1', query: { jid }, protocols: EXT });
    await t.gateway.welcome('c1');
    return t.frames('c1')[0] as { type: string; reason?: string };
  }

  it('refuses a token issued longer ago than the maximum age, even with exp far away', async () => {
    const old = await sign({ iat: now - 7_200, exp: now + 86_400 });
    expect((await firstFrame(old)).type).toBe('welcome');
    // Past its age a token is expired, as past its exp: the client may fetch a new one.
    expect(await firstFrame(old, 3_600)).toEqual({
      type: 'disconnect',
      reason: 'token_expired',
      reconnect: false,
    });
    const fresh = await sign({ iat: now - 60, exp: now + 86_400 });
    expect((await firstFrame(fresh, 3_600)).type).toBe('welcome');
  });

  it('refuses a token without iat when a maximum age is set', async () => {
    const noIat = await sign({ exp: now + 600 });
    expect((await firstFrame(noIat)).type).toBe('welcome');
    expect((await firstFrame(noIat, 3_600)).type).toBe('disconnect');
  });
});

describe('Gateway input: connect tokens', () => {
  const sign = (claims: Record<string, unknown>, exp?: number) => {
    const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject('alice');
    if (exp !== undefined) jwt.setExpirationTime(exp);
    return jwt.sign(new TextEncoder().encode(JWT_SECRET));
  };
  const now = 1_700_000_000;

  async function connectWith(jid: string, overrides: Partial<GatewayConfig> = {}) {
    const t = setup(overrides);
    await t.gateway.connect({ connectionId: 'c1', query: { jid }, protocols: EXT });
    await t.gateway.welcome('c1');
    return t.frames('c1');
  }

  it('refuses a token without exp', async () => {
    expect(await connectWith(await sign({}))).toEqual([
      { type: 'disconnect', reason: 'unauthorized', reconnect: false },
    ]);
  });

  it('tells a client with an expired token token_expired, so it can refresh it', async () => {
    expect(await connectWith(await sign({}, now - 60))).toEqual([
      { type: 'disconnect', reason: 'token_expired', reconnect: false },
    ]);
  });

  it('allows the configured clock skew', async () => {
    expect((await connectWith(await sign({}, now - 20)))[0]).toMatchObject({ type: 'welcome' });
    expect((await connectWith(await sign({}, now - 20), { jwtClockSkew: 5 }))[0]).toMatchObject({
      type: 'disconnect',
      reason: 'token_expired',
    });
  });

  it('checks iss and aud only when configured', async () => {
    const token = await sign({ iss: 'me', aud: 'cable' }, now + 60);
    expect((await connectWith(token))[0]).toMatchObject({ type: 'welcome' });
    expect((await connectWith(token, { jwtIssuer: 'me', jwtAudience: 'cable' }))[0]).toMatchObject({
      type: 'welcome',
    });
    expect((await connectWith(token, { jwtAudience: 'other' }))[0]).toEqual({
      type: 'disconnect',
      reason: 'unauthorized',
      reconnect: false,
    });
    expect((await connectWith(token, { jwtIssuer: 'other' }))[0]).toMatchObject({
      reason: 'unauthorized',
    });
  });

  it('refuses an identity over the limit', async () => {
    expect(await connectWith(await sign({ ext: 'x'.repeat(2000) }, now + 60))).toEqual([
      { type: 'disconnect', reason: 'unauthorized', reconnect: false },
    ]);
  });
});
