import { newEventId } from '../../events/event-id.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { IdempotencyKeyReusedError } from '../../kernel/errors.js';
import type { RequestIdStore } from '../../realtime/broadcasts/ports.js';

/** Options of {@link MemoryRequestIdStore}. */
export interface MemoryRequestIdStoreOptions {
  /** Seconds a scope's id base is kept from its first claim. */
  readonly ttlSeconds: number;
  /** Drives every TTL decision. @default the system clock */
  readonly clock?: Clock;
}

/** A {@link RequestIdStore} in process memory (tests, one node). */
export class MemoryRequestIdStore implements RequestIdStore {
  private readonly clock: Clock;
  private readonly claims = new Map<
    string,
    { base: string; fingerprint: string; expiresAt: number }
  >();

  constructor(private readonly options: MemoryRequestIdStoreOptions) {
    this.clock = options.clock ?? systemClock;
  }

  async claim(scope: string, fingerprint: string): Promise<string> {
    const now = this.clock.now();
    const first = this.claims.get(scope);
    if (first && first.expiresAt > now) {
      if (first.fingerprint !== fingerprint) throw new IdempotencyKeyReusedError({ scope });
      return first.base;
    }
    const base = newEventId(now);
    // Whole seconds, rounded up, as the DynamoDB store keeps it.
    const expiresAt = Math.ceil((now + this.options.ttlSeconds * 1000) / 1000) * 1000;
    this.claims.set(scope, { base, fingerprint, expiresAt });
    return base;
  }
}
