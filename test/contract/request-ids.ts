import { describe, expect, it } from 'vitest';
import { IdempotencyKeyReusedError, type RequestIdStore } from '../../lib/core';
import { FakeClock } from '../helpers/clock';

/** Seconds the stores under test keep a claim. */
export const CLAIM_TTL_SECONDS = 60;

let unique = 0;
/** A scope no other test uses (the tables are shared). */
function uniqueScope(label: string): string {
  unique++;
  return `caller-${process.pid}-${Date.now()}-${unique}#${label}`;
}

/**
 * What every {@link RequestIdStore} does: one id base per scope for {@link CLAIM_TTL_SECONDS}
 * from its first claim, refused to another body. Run against memory in unit tests and
 * against DynamoDB Local in integration tests.
 */
export function requestIdStoreContract(
  name: string,
  factory: (clock: FakeClock) => Promise<RequestIdStore>,
): void {
  describe(`${name} (RequestIdStore contract)`, () => {
    it('gives every claim of a scope the first one’s base while it is kept, and another scope another', async () => {
      const clock = new FakeClock();
      const store = await factory(clock);
      const [scope, other] = [uniqueScope('a'), uniqueScope('b')];
      const base = await store.claim(scope, 'body');
      clock.advanceSeconds(CLAIM_TTL_SECONDS - 1);
      expect(await store.claim(scope, 'body')).toBe(base);
      expect(await store.claim(other, 'body')).not.toBe(base);
      expect(base).toMatch(/^[0-9a-f]{28}$/);
    });

    it('forgets a scope its TTL after the first claim: a later claim gets a new base, for any body', async () => {
      const clock = new FakeClock();
      const store = await factory(clock);
      const scope = uniqueScope('expiring');
      const base = await store.claim(scope, 'body');
      clock.advanceSeconds(CLAIM_TTL_SECONDS / 2);
      await store.claim(scope, 'body'); // a retry does not extend it
      clock.advanceSeconds(CLAIM_TTL_SECONDS / 2 + 1);
      const next = await store.claim(scope, 'another body');
      expect(next).not.toBe(base);
      expect(await store.claim(scope, 'another body')).toBe(next);
    });

    it('refuses a claim with another body while the first is kept, naming the scope', async () => {
      const clock = new FakeClock();
      const store = await factory(clock);
      const scope = uniqueScope('reused');
      const base = await store.claim(scope, 'body');
      const error = await store.claim(scope, 'another body').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(IdempotencyKeyReusedError);
      expect((error as IdempotencyKeyReusedError).scope).toBe(scope);
      expect(await store.claim(scope, 'body')).toBe(base);
    });

    it('gives claims racing on one scope one base', async () => {
      const store = await factory(new FakeClock());
      const scope = uniqueScope('race');
      const bases = await Promise.all(Array.from({ length: 8 }, () => store.claim(scope, 'body')));
      expect(new Set(bases).size).toBe(1);
    });
  });
}
