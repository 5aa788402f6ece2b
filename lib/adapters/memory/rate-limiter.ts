import type { RateLimit, RateLimiter, RateVerdict } from '../../realtime/limits/ports.js';
import { bucketLifetimeMs, takeAt, verdictOf } from '../../realtime/limits/rate-limit.js';

interface MemoryBucket {
  /** Theoretical arrival time (µs); `undefined` until a token is taken. */
  tat: number | undefined;
  /** Refusals since the last allowed take. */
  strikes: number;
  /** When the bucket may be forgotten (ms): it is full again by then. */
  forgetAt: number;
}

/** A {@link RateLimiter} in process memory (one node, tests, local runs). */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, MemoryBucket>();

  constructor(private readonly limit: RateLimit) {}

  async take(connectionId: string, nowMs: number): Promise<RateVerdict> {
    const found = this.buckets.get(connectionId);
    const bucket =
      found && found.forgetAt > nowMs ? found : { tat: undefined, strikes: 0, forgetAt: 0 };
    const tat = takeAt(bucket.tat, nowMs, this.limit);
    if (tat === undefined) bucket.strikes++;
    else {
      bucket.tat = tat;
      bucket.strikes = 0;
    }
    bucket.forgetAt = nowMs + bucketLifetimeMs(this.limit);
    this.buckets.set(connectionId, bucket);
    return verdictOf(bucket.strikes, this.limit);
  }
}
