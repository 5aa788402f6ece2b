import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  createConnectToken,
  signStreamName,
  UnauthorizedError,
  verifyConnectToken,
  verifySignedStreamName,
} from '../../lib';
import { FakeClock } from '../helpers/clock';

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

  it('refuses a token after exp, measured on the injected clock', async () => {
    const clock = new FakeClock();
    const token = await createConnectToken({ sub: 'alice', ttlSeconds: 60 }, 'k', clock);
    clock.advanceSeconds(59);
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
