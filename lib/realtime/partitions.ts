/**
 * The pinger's partitions, pure: which bucket a connection is stored in, which buckets a
 * partition reads, and how many partitions (and buckets) the next minute needs.
 *
 * A connection and its subscriptions are stored in bucket `hash(id) mod B`. B only ever
 * grows (powers of two), so an item stored under an older, smaller B sits in a bucket below
 * it and reading every bucket under the current B still finds it. Partition `i` of `K` reads
 * the buckets `b` with `b mod K = i`: with `K` dividing the B an item was stored under, that
 * is the partition `hash mod K`, so a connection and its subscriptions meet in one partition,
 * and items stored under a B of at least `K` spread evenly over the `K` partitions.
 */

/** The smallest (and the initial) number of buckets. */
export const MIN_BUCKETS = 8;
/** At most this many partitions (API Gateway's 10,000 posts/s quota is reached well before). */
export const MAX_PARTITIONS = 256;
/**
 * A partition reads at most this many buckets per tick (a Query each): the next minute keeps
 * at least `B / 32` partitions, since B never shrinks.
 */
export const MAX_BUCKETS_PER_PARTITION = 32;
/**
 * B is raised to this many times K, ahead of K: connections stored now spread evenly over
 * the partitions of the next two doublings of K too.
 */
export const BUCKETS_PER_PARTITION = 4;
/** A run report older than this (ms) no longer describes the current minute. */
export const REPORT_MAX_AGE_MS = 150_000;

/** The layout the pinger's runs share: B buckets, K partitions, both powers of two, K ≤ B. */
export interface PingerLayout {
  /** B: connections are stored in `hash(id) mod B`. */
  readonly buckets: number;
  /** K: the pinger runs of one minute. */
  readonly partitions: number;
}

/** No layout stored yet: 8 buckets, one partition (one pinger run, as before partitions). */
export const DEFAULT_LAYOUT: PingerLayout = { buckets: MIN_BUCKETS, partitions: 1 };

/** What one pinger run of a partition found, for the next minute's plan. */
export interface PartitionReport {
  /** The partition, `0 ≤ partition < partitions`. */
  readonly partition: number;
  /** K of the minute the run belongs to. */
  readonly partitions: number;
  /** Connections the run tracked. */
  readonly connections: number;
  /** Their pings per second: the sum of `1 / pi` (seconds). */
  readonly load: number;
  /** When the run started (ms). */
  readonly startedAt: number;
  /** When this report was written (ms). */
  readonly at: number;
}

/** The bucket of a connection and of its subscriptions, `0 ≤ bucket < buckets`. */
export function bucketOf(connectionId: string, buckets: number): number {
  let h = 0;
  for (let i = 0; i < connectionId.length; i++) h = (h * 31 + connectionId.charCodeAt(i)) | 0;
  return Math.abs(h) % buckets;
}

/** The buckets partition `partition` of a layout reads: those `b` with `b mod K = partition`. */
export function bucketsOfPartition(partition: number, layout: PingerLayout): number[] {
  const out: number[] = [];
  for (let b = partition; b < layout.buckets; b += layout.partitions) out.push(b);
  return out;
}

/** Whether a layout is usable: powers of two, `K ≤ B`, within the limits. */
export function isLayout(layout: PingerLayout): boolean {
  const { buckets, partitions } = layout;
  return (
    isPowerOfTwo(buckets) &&
    isPowerOfTwo(partitions) &&
    buckets >= MIN_BUCKETS &&
    partitions <= buckets &&
    partitions <= MAX_PARTITIONS &&
    buckets <= MAX_PARTITIONS * BUCKETS_PER_PARTITION
  );
}

/**
 * A stored layout as it can be used: itself when valid ({@link isLayout}), else one
 * partition over B rounded up to a power of two (B must not shrink: items sit in its buckets).
 */
export function usableLayout(layout: PingerLayout): PingerLayout {
  if (isLayout(layout)) return layout;
  const max = MAX_PARTITIONS * BUCKETS_PER_PARTITION;
  const buckets = Number.isFinite(layout.buckets) ? layout.buckets : MIN_BUCKETS;
  return { buckets: Math.min(max, nextPowerOfTwo(Math.max(buckets, MIN_BUCKETS))), partitions: 1 };
}

/**
 * The pings per second of all connections, from the latest minute's reports (those of
 * `layout.partitions`, at most {@link REPORT_MAX_AGE_MS} old): a partition without a report
 * counts as the mean of the others. `undefined` when no report tells.
 */
export function estimateLoad(
  layout: PingerLayout,
  reports: readonly PartitionReport[],
  now: number,
): number | undefined {
  const current = new Map<number, PartitionReport>();
  for (const r of reports) {
    if (r.partitions !== layout.partitions || r.partition >= layout.partitions) continue;
    if (now - r.at > REPORT_MAX_AGE_MS) continue;
    const known = current.get(r.partition);
    if (!known || r.at > known.at) current.set(r.partition, r);
  }
  if (current.size === 0) return undefined;
  const sum = [...current.values()].reduce((s, r) => s + r.load, 0);
  return (sum / current.size) * layout.partitions;
}

/**
 * The next minute's layout: K = the power of two at or above `load / rate` (pings per
 * second per partition), at least `B / 32` (bounded reads) and at most 256; B raised to 4K
 * when under it, never lowered. Without a load (no report), the layout stays.
 */
export function planLayout(
  layout: PingerLayout,
  load: number | undefined,
  rate: number,
): PingerLayout {
  if (load === undefined) return layout;
  const needed = nextPowerOfTwo(Math.ceil(load / rate));
  const floor = layout.buckets / MAX_BUCKETS_PER_PARTITION;
  const partitions = Math.min(MAX_PARTITIONS, Math.max(needed, floor, 1));
  const buckets = Math.max(layout.buckets, MIN_BUCKETS, partitions * BUCKETS_PER_PARTITION);
  return { buckets, partitions };
}

/** The smallest power of two at or above `n` (1 for `n ≤ 1`). */
export function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && (n & (n - 1)) === 0;
}
