import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  createConnectToken,
  signStreamName,
  UnauthorizedError,
  verifyConnectToken,
  verifySignedStreamName,
} from '../../../../lib/core';
import { FakeClock } from '../../../helpers/clock';

describe('signed stream names', () => {
  it('signs like AnyCable: base64 of the JSON name, "--", hex HMAC-SHA256 of the encoded part', () => {
    const signed = signStreamName('chat/42', 'secret');
    const [encoded, digest] = signed.split('--');
    expect(Buffer.from(encoded!, 'base64').toString()).toBe('"chat/42"');
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(signStreamName('chat/42', 'other')).not.toBe(signed);
  });

  it('verifies its own signature and returns the name', () => {
    expect(verifySignedStreamName(signStreamName('chat/42', 's'), 's')).toBe('chat/42');
  });

  it('refuses a forged digest, another secret, a tampered name and garbage', () => {
    const signed = signStreamName('chat/42', 's');
    const [encoded] = signed.split('--');
    expect(verifySignedStreamName(`${encoded}--${'0'.repeat(64)}`, 's')).toBeUndefined();
    expect(verifySignedStreamName(signed, 'other')).toBeUndefined();
    const tampered = Buffer.from('"chat/43"').toString('base64');
    expect(verifySignedStreamName(`${tampered}--${signed.split('--')[1]}`, 's')).toBeUndefined();
    expect(verifySignedStreamName('no-separator', 's')).toBeUndefined();
    expect(verifySignedStreamName(`${encoded}--short`, 's')).toBeUndefined();
    expect(verifySignedStreamName(signed, '')).toBeUndefined();
  });
});

describe('connect tokens', () => {
  it('round-trips the subject as identity', async () => {
    const clock = new FakeClock();
    const token = await createConnectToken({ sub: 'alice', ttlSeconds: 60 }, 'k', clock);
    expect(await verifyConnectToken(token, 'k', clock)).toEqual({ identity: 'alice' });
  });

  it("uses AnyCable's ext claim as identity when present", async () => {
    const clock = new FakeClock();
    const ext = JSON.stringify({ user_id: 42 });
    const token = await createConnectToken({ sub: 'alice', ttlSeconds: 60, ext }, 'k', clock);
    expect(await verifyConnectToken(token, 'k', clock)).toEqual({ identity: ext });
  });

  it('refuses a token after exp plus the 30 s skew, measured on the injected clock', async () => {
    const clock = new FakeClock();
    const token = await createConnectToken({ sub: 'alice', ttlSeconds: 60 }, 'k', clock);
    clock.advanceSeconds(89);
    await expect(verifyConnectToken(token, 'k', clock)).resolves.toEqual({ identity: 'alice' });
    clock.advanceSeconds(2);
    const error = await verifyConnectToken(token, 'k', clock).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnauthorizedError);
    expect((error as UnauthorizedError).reason).toBe('expired');
  });

  it('refuses a bad signature, a malformed token, a token without identity and a missing secret', async () => {
    const clock = new FakeClock();
    const token = await createConnectToken({ sub: 'alice', ttlSeconds: 60 }, 'k', clock);
    const reason = (p: Promise<unknown>) =>
      p.then(
        () => 'accepted',
        (e: unknown) => (e instanceof UnauthorizedError ? e.reason : `other: ${String(e)}`),
      );
    expect(await reason(verifyConnectToken(token, 'wrong', clock))).toBe('signature');
    expect(await reason(verifyConnectToken('not-a-token', 'k', clock))).toBe('malformed');
    expect(await reason(verifyConnectToken(token, '', clock))).toBe('signature');
    const anonymous = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode('k'));
    expect(await reason(verifyConnectToken(anonymous, 'k', clock))).toBe('claims');
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from('{"sub":"x"}').toString('base64url')}.`;
    expect(await reason(verifyConnectToken(none, 'k', clock))).not.toBe('accepted');
  });
});

describe('connect token checks', () => {
  const secret = 'jwt';
  const clock = new FakeClock(1_700_000_000_000);
  const now = 1_700_000_000;
  const sign = (claims: Record<string, unknown>, exp?: number) => {
    const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject('u1');
    if (exp !== undefined) jwt.setExpirationTime(exp);
    return jwt.sign(new TextEncoder().encode(secret));
  };

  it('requires exp', async () => {
    await expect(verifyConnectToken(await sign({}), secret, clock)).rejects.toMatchObject({
      reason: 'claims',
    });
  });

  it('tolerates 30 s of clock skew by default, and the configured amount', async () => {
    const token = await sign({}, now - 20);
    await expect(verifyConnectToken(token, secret, clock)).resolves.toEqual({ identity: 'u1' });
    await expect(
      verifyConnectToken(token, secret, clock, { clockSkewSeconds: 10 }),
    ).rejects.toMatchObject({ reason: 'expired' });
    await expect(
      verifyConnectToken(await sign({}, now - 40), secret, clock),
    ).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it('checks iss and aud when given', async () => {
    const token = await sign({ iss: 'a', aud: ['x', 'y'] }, now + 60);
    await expect(
      verifyConnectToken(token, secret, clock, { issuer: 'a', audience: 'y' }),
    ).resolves.toEqual({ identity: 'u1' });
    await expect(verifyConnectToken(token, secret, clock, { audience: 'z' })).rejects.toMatchObject(
      { reason: 'claims' },
    );
    await expect(verifyConnectToken(token, secret, clock, { issuer: 'b' })).rejects.toMatchObject({
      reason: 'claims',
    });
    await expect(
      verifyConnectToken(await sign({}, now + 60), secret, clock, { audience: 'x' }),
    ).rejects.toMatchObject({ reason: 'claims' });
  });

  it('refuses an identity over 1024 bytes', async () => {
    const token = await sign({ ext: 'é'.repeat(513) }, now + 60);
    await expect(verifyConnectToken(token, secret, clock)).rejects.toMatchObject({
      reason: 'claims',
      message: expect.stringContaining('the limit is 1024'),
    });
  });
});
