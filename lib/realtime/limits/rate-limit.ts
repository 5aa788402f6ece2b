import type { RateLimit, RateVerdict } from './ports.js';
/**
 * Per-connection rate limits: a token bucket of `burst` tokens, refilled at `rate` tokens per
 * second, from which every `subscribe`, `history`, `whisper`, `message`, `join` and `presence`
 * frame takes one (a `leave` never: a dropped leave would leave a member behind).
 *
 * The bucket is kept as GCRA's theoretical arrival time (`tat`, µs): the time at which the
 * bucket would be full again. A take is allowed when `max(tat, now) + interval` is at most
 * `burst` intervals ahead of now, and moves `tat` by one interval. That is the same bucket,
 * as one number that only grows, so a store can take a token with one conditional update
 * (`tat = tat + interval` while the bucket is not full, `tat = now + interval` once it is)
 * instead of a read-modify-write of tokens and a refill time.
 */

/** The commands that take a token; `unsubscribe`, `leave` and `pong` never do. */
export const RATE_LIMITED_COMMANDS = [
  'subscribe',
  'history',
  'whisper',
  'message',
  'join',
  'presence',
] as const;

/** A command {@link RATE_LIMITED_COMMANDS} names. */
export type RateLimitedCommand = (typeof RATE_LIMITED_COMMANDS)[number];

/**
 * Microseconds per token, a whole number: times are kept in whole microseconds, so that every
 * sum is exact in a double as in DynamoDB's decimals and the two never disagree at a boundary.
 * (Rounding moves the rate by less than a millionth of a token per second.)
 */
export function emissionInterval(limit: RateLimit): number {
  return Math.max(1, Math.round(1_000_000 / limit.rate));
}

/** A time in ms as the whole microseconds a bucket is kept in. */
export function microseconds(ms: number): number {
  return Math.round(ms * 1000);
}

/** The latest `tat` (µs) a take at `nowMs` is allowed on: `burst − 1` intervals ahead of now. */
export function latestAllowedTat(nowMs: number, limit: RateLimit): number {
  return microseconds(nowMs) + (limit.burst - 1) * emissionInterval(limit);
}

/**
 * One take on a bucket whose theoretical arrival time is `tat` (µs; `undefined`: no bucket
 * yet, it is full): the new `tat` when a token is taken, or `undefined` when the bucket is
 * empty.
 */
export function takeAt(
  tat: number | undefined,
  nowMs: number,
  limit: RateLimit,
): number | undefined {
  if (tat !== undefined && tat > latestAllowedTat(nowMs, limit)) return undefined;
  const now = microseconds(nowMs);
  return Math.max(tat ?? now, now) + emissionInterval(limit);
}

/** Tokens left at `nowMs` in a bucket with theoretical arrival time `tat` (µs). */
export function tokensAt(tat: number | undefined, nowMs: number, limit: RateLimit): number {
  if (tat === undefined) return limit.burst;
  const ahead = Math.max(0, tat - microseconds(nowMs));
  return Math.max(0, limit.burst - ahead / emissionInterval(limit));
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
  return Math.ceil((limit.burst * emissionInterval(limit)) / 1000);
}
