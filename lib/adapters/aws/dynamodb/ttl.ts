/**
 * A DynamoDB TTL attribute for an expiry time in ms: whole epoch seconds, as TTL expects,
 * rounded up so an item never expires before its time.
 */
export function ttlSeconds(expiresAtMs: number): number {
  return Math.ceil(expiresAtMs / 1000);
}
