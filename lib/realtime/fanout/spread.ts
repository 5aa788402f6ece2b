/**
 * How one stream's subscriptions are spread, so that no stream sits on one partition key and
 * no invocation posts to a whole audience.
 *
 * Each subscription has a 32-bit hash of its connection id. Its low bits pick one of the
 * stream's **shards** (a partition key of its own: DynamoDB's per-partition limits apply per
 * shard); its hex digits, high first, sort it within the shard, so that a **prefix** of them
 * names a fixed slice of the shard that a delivery task can read with one `begins_with`
 * Query. A connection is in the same shard and slice for every frame of the stream, which is
 * what keeps its frames in order when slices are delivered by different invocations.
 *
 * A stream's spread (its number of shards) only grows: a subscription stored under a smaller
 * spread sits in shard `hash mod old` < old ≤ new, which a read of shards [0, new) still
 * covers. Writers may use a stale (smaller) spread; readers must not, and learn it from shard
 * 0, where the stream's spread item sorts first.
 */

/** The most shards a stream is spread over. */
export const MAX_SPREAD = 1024;
/** Hex digits of a subscriber's hash: the deepest prefix. */
export const HASH_DIGITS = 8;
/** Slices of a prefix one digit longer. */
export const PREFIX_FANOUT = 16;

/** FNV-1a over the UTF-16 code units of a connection id: stable across processes. */
export function subscriberHash(connectionId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < connectionId.length; i++) {
    h ^= connectionId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The sort key of a subscriber within its shard: its hash, 8 hex digits. */
export function subscriberSortKey(connectionId: string): string {
  return subscriberHash(connectionId).toString(16).padStart(HASH_DIGITS, '0');
}

/** The shard of a subscriber under `spread` shards (a power of two). */
export function shardOf(connectionId: string, spread: number): number {
  return subscriberHash(connectionId) % spread;
}

/** Whether `n` is a spread: a power of two from 1 to {@link MAX_SPREAD}. */
export function isSpread(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 1 && n <= MAX_SPREAD && (n & (n - 1)) === 0;
}

/** The smallest spread that gives each shard at most `perShard` of `subscribers`. */
export function spreadFor(subscribers: number, perShard: number): number {
  let spread = 1;
  while (spread < MAX_SPREAD && subscribers > spread * perShard) spread *= 2;
  return spread;
}

/** The slices one digit longer than `prefix`; none under a full hash. */
export function childPrefixes(prefix: string): string[] {
  if (prefix.length >= HASH_DIGITS) return [];
  return Array.from({ length: PREFIX_FANOUT }, (_, d) => prefix + d.toString(16));
}

/** `[from, to)` cut into at most `parts` contiguous, non-empty ranges, in order. */
export function splitRange(from: number, to: number, parts: number): [number, number][] {
  const n = to - from;
  const count = Math.min(parts, n);
  const out: [number, number][] = [];
  for (let i = 0; i < count; i++) {
    out.push([from + Math.floor((n * i) / count), from + Math.floor((n * (i + 1)) / count)]);
  }
  return out;
}

/** `items` cut into consecutive chunks of at most `size`. */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
