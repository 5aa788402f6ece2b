/**
 * The pinger's partitions, pure: which bucket a connection is stored in, what a partition
 * reads and keeps, and how many partitions (and buckets) the next minute needs.
 *
 * A connection and its subscriptions are stored in bucket `hash(id) mod B`. B only ever
 * grows (powers of two), so an item stored under an older, smaller B sits in a bucket below
 * it and reading every bucket under the current B still finds it. Partition `i` of `K` keeps
 * the connections with `hash mod K = i`, whatever B they were stored under: so each keeps
 * its share, and a connection and its subscriptions meet in one partition. It reads the
 * buckets `b ≡ i (mod K)` (where items stored under a B of at least K sit) and, for each
 * older B' under K, bucket `i mod B'` (shared with other partitions, filtered on read).
 */
/** The smallest (and the initial) number of buckets. */
export const MIN_BUCKETS = 8;
/**
 * At most this many partitions: 819,200 pings/s at the default rate, far past any account's
 * `@connections` quota (10,000/s by default), so work per run stays bounded for any audience
 * the quota lets exist.
 */
export const MAX_PARTITIONS = 4096;
/**
 * A partition reads at most this many buckets per tick (a Query each): the next minute keeps
 * at least `B / 32` partitions, since B never shrinks.
 */
export const MAX_BUCKETS_PER_PARTITION = 32;
/**
 * B is raised to this many times K, ahead of K: connections stored now sit in buckets of
 * their own partition for the next two doublings of K too, so that no partition reads (and
 * drops) another's.
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

/** What one partition's run reads and keeps. */
export interface PartitionScope {
  /** The bucket indexes it reads. */
  readonly buckets: readonly number[];
  /** Whether a connection is this partition's: `bucketOf(id, K) = partition`. */
  owns(connectionId: string): boolean;
}

/** What partition `partition` of a layout reads (its buckets) and keeps (its connections). */
export function partitionScope(partition: number, layout: PingerLayout): PartitionScope {
  const { buckets, partitions } = layout;
  const read = new Set<number>();
  for (let b = partition; b < buckets; b += partitions) read.add(b);
  // A connection stored under an older B' < K sits in bucket `hash mod B'` = `partition mod B'`.
  for (let older = MIN_BUCKETS; older < partitions; older *= 2) read.add(partition % older);
  return {
    buckets: [...read].sort((a, b) => a - b),
    owns: (connectionId) => partitions === 1 || bucketOf(connectionId, partitions) === partition,
  };
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
 * second per partition), at least `B / 32` (bounded reads) and at most 4,096; B raised to 4K
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
