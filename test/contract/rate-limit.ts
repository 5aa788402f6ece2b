import { describe, expect, it } from 'vitest';
import type { RateLimit, RateLimiter } from '../../lib/core';

let n = 0;
const id = (label: string) => `${label}-${process.pid}-${Date.now()}-${++n}`;

/** The moment the takes are dated from (whole seconds, as a Lambda's clock could be). */
const T0 = Math.floor(Date.now() / 1000) * 1000;

/** The RateLimiter contract, run against memory and DynamoDB. */
export function rateLimiterContract(
  name: string,
  factory: (limit: RateLimit) => Promise<RateLimiter> | RateLimiter,
): void {
  describe(`${name} (RateLimiter contract)`, () => {
    const takes = async (limiter: RateLimiter, connectionId: string, count: number, at: number) => {
      const out: boolean[] = [];
      for (let i = 0; i < count; i++) out.push((await limiter.take(connectionId, at)).allowed);
      return out;
    };

    it('allows a rested connection its burst at once, then refuses', async () => {
      const limiter = await factory({ rate: 2, burst: 5 });
      const c = id('burst');
      expect(await takes(limiter, c, 7, T0)).toEqual([true, true, true, true, true, false, false]);
    });

    it('refills one token per 1/rate seconds', async () => {
      const limiter = await factory({ rate: 4, burst: 2 });
      const c = id('refill');
      expect(await takes(limiter, c, 3, T0)).toEqual([true, true, false]);
      expect(await takes(limiter, c, 1, T0 + 249)).toEqual([false]);
      expect(await takes(limiter, c, 2, T0 + 250)).toEqual([true, false]);
      expect(await takes(limiter, c, 3, T0 + 750)).toEqual([true, true, false]);
    });

    it('refills a fractional rate exactly: 3 tokens per second', async () => {
      const limiter = await factory({ rate: 3, burst: 3 });
      const c = id('fraction');
      expect(await takes(limiter, c, 4, T0)).toEqual([true, true, true, false]);
      expect(await takes(limiter, c, 2, T0 + 1000)).toEqual([true, true]);
      expect(await takes(limiter, c, 2, T0 + 1000)).toEqual([true, false]);
    });

    it('never holds more than the burst, however long the connection rested', async () => {
      const limiter = await factory({ rate: 10, burst: 3 });
      const c = id('rested');
      await takes(limiter, c, 1, T0);
      expect(await takes(limiter, c, 5, T0 + 3_600_000)).toEqual([true, true, true, false, false]);
    });

    it('gives a clock behind the last take (another Lambda) no extra token', async () => {
      const limiter = await factory({ rate: 1, burst: 2 });
      const c = id('skew');
      expect(await takes(limiter, c, 2, T0)).toEqual([true, true]);
      expect(await takes(limiter, c, 1, T0 - 5_000)).toEqual([false]);
      expect(await takes(limiter, c, 1, T0 + 1_000)).toEqual([true]);
    });

    it('counts refusals in a row, flags the one past the burst as flooding, and an allowed take resets them', async () => {
      const limiter = await factory({ rate: 1, burst: 2 });
      const c = id('strikes');
      const verdicts = [];
      for (let i = 0; i < 6; i++) verdicts.push(await limiter.take(c, T0));
      expect(verdicts).toEqual([
        { allowed: true, strikes: 0, flooding: false },
        { allowed: true, strikes: 0, flooding: false },
        { allowed: false, strikes: 1, flooding: false },
        { allowed: false, strikes: 2, flooding: false },
        { allowed: false, strikes: 3, flooding: true },
        { allowed: false, strikes: 4, flooding: false },
      ]);
      expect(await limiter.take(c, T0 + 1000)).toEqual({
        allowed: true,
        strikes: 0,
        flooding: false,
      });
      expect(await limiter.take(c, T0 + 1000)).toEqual({
        allowed: false,
        strikes: 1,
        flooding: false,
      });
    });

    it('keeps the buckets of connections apart', async () => {
      const limiter = await factory({ rate: 1, burst: 1 });
      const [a, b] = [id('apart-a'), id('apart-b')];
      expect(await takes(limiter, a, 2, T0)).toEqual([true, false]);
      expect(await takes(limiter, b, 1, T0)).toEqual([true]);
    });

    it('allows exactly the burst to many takes at once on one bucket', async () => {
      const limiter = await factory({ rate: 1, burst: 10 });
      const c = id('concurrent');
      const verdicts = await Promise.all(Array.from({ length: 60 }, () => limiter.take(c, T0)));
      expect(verdicts.filter((v) => v.allowed)).toHaveLength(10);
      // Every refusal was counted once, and exactly one of them was the flood.
      expect(
        verdicts
          .filter((v) => !v.allowed)
          .map((v) => v.strikes)
          .sort((x, y) => x - y),
      ).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      expect(verdicts.filter((v) => v.flooding)).toHaveLength(1);
    });

    it('never allows more than the burst plus the refill to takes at once on the real clock', async () => {
      const limit = { rate: 20, burst: 10 };
      const limiter = await factory(limit);
      const c = id('wall-clock');
      const start = Date.now();
      const verdicts = await Promise.all(
        Array.from({ length: 80 }, () => limiter.take(c, Date.now())),
      );
      const elapsedS = (Date.now() - start) / 1000;
      const allowed = verdicts.filter((v) => v.allowed).length;
      expect(allowed).toBeGreaterThanOrEqual(limit.burst);
      expect(allowed).toBeLessThanOrEqual(limit.burst + Math.floor(elapsedS * limit.rate) + 1);
    });
  });
}
