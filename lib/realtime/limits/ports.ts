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
