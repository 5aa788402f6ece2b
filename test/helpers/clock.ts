import type { Clock } from '../../lib/core';

/**
 * A clock that only moves when told. It starts in the year 2100 so that DynamoDB
 * Local's wall-clock TTL sweeper never deletes items a test still expects.
 */
export class FakeClock implements Clock {
  constructor(private ms = Date.UTC(2100, 0, 1)) {}

  now(): number {
    return this.ms;
  }

  /** Moves time forward by `ms`. */
  advance(ms: number): void {
    this.ms += ms;
  }

  /** Moves time forward by `s` seconds. */
  advanceSeconds(s: number): void {
    this.ms += s * 1000;
  }
}
