/**
 * Per-connection rate limits: a token bucket of `burst` tokens, refilled at `rate` tokens per
 * second, from which every `subscribe`, `history`, `whisper` and `message` frame takes one.
 *
 * The bucket is kept as GCRA's theoretical arrival time (`tat`, ms): the time at which the
 * bucket would be full again. A take is allowed when `max(tat, now) + interval` is at most
 * `burst` intervals ahead of now, and moves `tat` by one interval. That is the same bucket,
 * as one number that only grows, so a store can take a token with one conditional update
 * (`tat = tat + interval` while the bucket is not full, `tat = now + interval` once it is)
 * instead of a read-modify-write of tokens and a refill time.
 */

/** The commands that take a token; `unsubscribe` and `pong` never do. */
export const RATE_LIMITED_COMMANDS = ['subscribe', 'history', 'whisper', 'message'] as const;

/** A command {@link RATE_LIMITED_COMMANDS} names. */
export type RateLimitedCommand = (typeof RATE_LIMITED_COMMANDS)[number];

/** A bucket's size and refill rate. */
export interface RateLimit {
  /** Tokens added per second (> 0). */
  readonly rate: number;
  /** Tokens the bucket holds: the most frames a rested connection may send at once (>= 1). */
  readonly burst: number;
}

/** What {@link RateLimiter.take} decided. */
export interface RateVerdict {
  /** Whether the frame may go on (a token was taken). */
  readonly allowed: boolean;
  /** Frames refused since the last allowed one, this one included; `0` when allowed. */
  readonly strikes: number;
  /**
   * Whether this refusal is the one that makes the refusals in a row exceed the burst: the
   * connection keeps flooding and is to be disconnected. True for one take per run of
   * refusals.
   */
  readonly flooding: boolean;
}

/** Token buckets per connection, kept where every Lambda sees them. */
export interface RateLimiter {
  /** Takes a token from the connection's bucket at `nowMs`, or counts a refusal. */
  take(connectionId: string, nowMs: number): Promise<RateVerdict>;
}

/** Milliseconds per token. */
export function emissionInterval(limit: RateLimit): number {
  return 1000 / limit.rate;
}

/**
 * The latest `tat` a take at `nowMs` is allowed on: `burst − 1` intervals ahead of now (the
 * take itself adds one). A microsecond of slack keeps rounding from refusing the last token:
 * near 1.7e12 ms a double is exact to about 2.4e-4 ms, and a store may add intervals in exact
 * decimal arithmetic (DynamoDB) while this bound is computed in doubles.
 */
export function latestAllowedTat(nowMs: number, limit: RateLimit): number {
  return nowMs + (limit.burst - 1) * emissionInterval(limit) + 1e-3;
}

/**
 * One take on a bucket whose theoretical arrival time is `tat` (`undefined`: no bucket yet,
 * it is full): the new `tat` when a token is taken, or `undefined` when the bucket is empty.
 */
export function takeAt(
  tat: number | undefined,
  nowMs: number,
  limit: RateLimit,
): number | undefined {
  if (tat !== undefined && tat > latestAllowedTat(nowMs, limit)) return undefined;
  return Math.max(tat ?? nowMs, nowMs) + emissionInterval(limit);
}

/** Tokens left in a bucket with theoretical arrival time `tat` at `nowMs`. */
export function tokensAt(tat: number | undefined, nowMs: number, limit: RateLimit): number {
  if (tat === undefined) return limit.burst;
  return Math.max(0, limit.burst - Math.max(0, tat - nowMs) / emissionInterval(limit));
}

/** The verdict on a take, from the refusals in a row it makes (`0`: allowed). */
export function verdictOf(strikes: number, limit: RateLimit): RateVerdict {
  return { allowed: strikes === 0, strikes, flooding: strikes === limit.burst + 1 };
}

/**
 * Milliseconds after which a bucket last written at `nowMs` is full again whatever it held,
 * and its refusals in a row no longer matter (the next take is allowed and resets them): how
 * long a store needs to keep it.
 */
export function bucketLifetimeMs(limit: RateLimit): number {
  return limit.burst * emissionInterval(limit);
}
