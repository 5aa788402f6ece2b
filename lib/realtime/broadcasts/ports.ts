/**
 * Keeps, per `Idempotency-Key` of `POST /_broadcast`, the base its first attempt gave the
 * request's event ids, so that every retry gives each message the id it had
 * (`requestEventIds`) and the outbox refuses what is written already. It outlives a failed
 * attempt (Powertools Idempotency deletes its own record then), for the key's TTL.
 */
export interface RequestIdStore {
  /**
   * The id base of `scope` (the caller and the key): the first attempt's while it is kept,
   * else a new one, kept from now; throws `IdempotencyKeyReusedError` when the first
   * attempt's `fingerprint` (of its body, `requestFingerprint`) is another.
   */
  claim(scope: string, fingerprint: string): Promise<string>;
}
