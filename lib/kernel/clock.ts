/** Injected time source, in milliseconds since the epoch. */
export interface Clock {
  /** Now, in milliseconds. */
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };
