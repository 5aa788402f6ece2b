import { describe, expect, it } from 'vitest';
import {
  bucketLifetimeMs,
  emissionInterval,
  takeAt,
  tokensAt,
  verdictOf,
} from '../../../../lib/realtime/limits/rate-limit';
import { MemoryRateLimiter } from '../../../../lib/testing';
import { rateLimiterContract } from '../../../contract/rate-limit';

rateLimiterContract('MemoryRateLimiter', (limit) => new MemoryRateLimiter(limit));

describe('the token bucket (GCRA)', () => {
  const limit = { rate: 10, burst: 3 };
  const now = 1_000_000;

  /** Takes `count` tokens at `at`, from `tat`: the new tat and which were allowed. */
  function run(tat: number | undefined, at: number, count: number) {
    const allowed: boolean[] = [];
    for (let i = 0; i < count; i++) {
      const next = takeAt(tat, at, limit);
      allowed.push(next !== undefined);
      if (next !== undefined) tat = next;
    }
    return { tat, allowed };
  }

  it('spaces tokens one interval apart: 1 / rate s, in whole microseconds', () => {
    expect(emissionInterval(limit)).toBe(100_000);
    expect(emissionInterval({ rate: 0.5, burst: 1 })).toBe(2_000_000);
    expect(emissionInterval({ rate: 3, burst: 1 })).toBe(333_333);
  });

  it('starts full: the burst at once, then empty', () => {
    const { tat, allowed } = run(undefined, now, 4);
    expect(allowed).toEqual([true, true, true, false]);
    expect(tat).toBe((now + 300) * 1000);
    expect(tokensAt(tat, now, limit)).toBe(0);
  });

  it('refills one token per interval, never past the burst', () => {
    const { tat } = run(undefined, now, 3);
    expect(tokensAt(tat, now + 100, limit)).toBeCloseTo(1);
    expect(run(tat, now + 99, 1).allowed).toEqual([false]);
    expect(run(tat, now + 100, 2).allowed).toEqual([true, false]);
    expect(tokensAt(tat, now + 60_000, limit)).toBe(3);
    expect(run(tat, now + 60_000, 4).allowed).toEqual([true, true, true, false]);
  });

  it('never moves tat back: a take dated before it (a slower clock) starts from it', () => {
    const { tat } = run(undefined, now, 1);
    expect(takeAt(tat, now - 50, limit)).toBe(tat! + 100_000);
    // A second behind, the bucket looks empty to it: the slower clock gets fewer tokens, never more.
    expect(takeAt(tat, now - 1000, limit)).toBeUndefined();
  });

  it('lets a bucket be forgotten once it is full again: burst intervals after its last write', () => {
    expect(bucketLifetimeMs(limit)).toBe(300);
    const { tat } = run(undefined, now, 3);
    expect(tokensAt(tat, now + bucketLifetimeMs(limit), limit)).toBe(3);
  });

  it('calls the refusal that makes the refusals in a row exceed the burst the flood, once', () => {
    expect(verdictOf(0, limit)).toEqual({ allowed: true, strikes: 0, flooding: false });
    expect(verdictOf(3, limit)).toEqual({ allowed: false, strikes: 3, flooding: false });
    expect(verdictOf(4, limit)).toEqual({ allowed: false, strikes: 4, flooding: true });
    expect(verdictOf(5, limit)).toEqual({ allowed: false, strikes: 5, flooding: false });
  });
});
