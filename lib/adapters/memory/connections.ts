import { type Clock, systemClock } from '../../kernel/clock.js';
import { ConfigError } from '../../kernel/errors.js';
import { isSpread, MAX_SPREAD, shardOf, subscriberSortKey } from '../../realtime/fanout/spread.js';
import { bucketOf, MIN_BUCKETS } from '../../realtime/keepalive/partitions.js';
import type {
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  IndexProbe,
  SliceRead,
  SubscriberSlice,
  Subscription,
  SubscriptionAdd,
} from '../../realtime/ports.js';

/** A subscription in a stream's shard, with its sort key (hash). */
interface Placed {
  readonly sort: string;
  readonly subscription: Subscription;
}

/** One shard of one stream: its subscriptions, and them sorted when read. */
interface Shard {
  readonly entries: Map<string, Placed>;
  sorted: Placed[] | undefined;
}

/** An in-memory {@link ConnectionStore}. */
export class MemoryConnectionStore implements ConnectionStore {
  private readonly connections = new Map<
    string,
    { record: ConnectionRecord; changedAt: number; bucket: number }
  >();
  private readonly subscriptions = new Map<
    string,
    Map<string, { subscription: Subscription; changedAt: number; shard: string; bucket: number }>
  >();
  /** `<stream>#<shard>` → the shard's subscriptions, as `byStreamShard` holds them. */
  private readonly shards = new Map<string, Shard>();
  private readonly spreads = new Map<string, number>();
  /** Bucket → the connection ids with a connection or subscription stored in it. */
  private readonly byBucket = new Map<number, Set<string>>();
  private readonly clock: Clock;
  private readonly buckets: () => Promise<number> | number;

  /**
   * `clock` dates the changes ({@link changesSince}); `buckets` is B for writes (as the
   * DynamoDB store's option; it must never shrink), 8 by default.
   */
  constructor(options: { clock?: Clock; buckets?: () => Promise<number> | number } = {}) {
    this.clock = options.clock ?? systemClock;
    this.buckets = options.buckets ?? (() => MIN_BUCKETS);
  }

  async putConnection(connection: ConnectionRecord): Promise<void> {
    const bucket = await this.bucketOf(connection.connectionId);
    this.connections.set(connection.connectionId, {
      record: connection,
      changedAt: this.clock.now(),
      bucket,
    });
  }

  async getConnection(connectionId: string): Promise<ConnectionRecord | undefined> {
    return this.connections.get(connectionId)?.record;
  }

  async connectionsOf(identity: string): Promise<ConnectionRecord[]> {
    return [...this.connections.values()]
      .map((c) => c.record)
      .filter((c) => c.identity === identity);
  }

  async addSubscription(subscription: Subscription, limit?: number): Promise<SubscriptionAdd> {
    // B first: what follows runs without a pause, so exactly one of concurrent adds wins.
    const bucket = await this.bucketOf(subscription.connectionId);
    const subs = this.subscriptions.get(subscription.connectionId) ?? new Map();
    const held = subs.get(subscription.stream)?.subscription;
    if (held) return held.identifier === subscription.identifier ? 'subscribed' : 'stream_taken';
    if (limit !== undefined) {
      if (!this.connections.has(subscription.connectionId)) return 'gone';
      if (subs.size >= limit) return 'limit';
    }
    const spread = this.spreads.get(subscription.stream) ?? 1;
    const shardKey = `${subscription.stream}#${shardOf(subscription.connectionId, spread)}`;
    subs.set(subscription.stream, {
      subscription,
      changedAt: this.clock.now(),
      shard: shardKey,
      bucket,
    });
    this.subscriptions.set(subscription.connectionId, subs);
    const shard = this.shards.get(shardKey) ?? { entries: new Map(), sorted: undefined };
    shard.entries.set(subscription.connectionId, {
      sort: subscriberSortKey(subscription.connectionId),
      subscription,
    });
    shard.sorted = undefined;
    this.shards.set(shardKey, shard);
    return 'added';
  }

  private unplace(placed: { subscription: Subscription; shard: string }): void {
    const shard = this.shards.get(placed.shard);
    if (shard?.entries.delete(placed.subscription.connectionId)) shard.sorted = undefined;
    if (shard?.entries.size === 0) this.shards.delete(placed.shard);
  }

  async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<boolean> {
    const subs = this.subscriptions.get(connectionId);
    const placed = subs?.get(stream);
    if (!placed || placed.subscription.identifier !== identifier) return false;
    this.unplace(placed);
    subs!.delete(stream);
    const connection = this.connections.get(connectionId);
    if (connection) connection.changedAt = this.clock.now();
    return true;
  }

  async subscriptionOf(connectionId: string, stream: string): Promise<Subscription | undefined> {
    return this.subscriptions.get(connectionId)?.get(stream)?.subscription;
  }

  async subscriptionsOf(connectionId: string): Promise<Subscription[]> {
    return [...(this.subscriptions.get(connectionId)?.values() ?? [])].map((s) => s.subscription);
  }

  async *subscribersOf(stream: string, pageSize = 100): AsyncIterable<Subscription[]> {
    const spread = this.spreads.get(stream) ?? 1;
    for (let shard = 0; shard < spread; shard++) {
      const all = this.sortedShard(`${stream}#${shard}`).map((p) => p.subscription);
      for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
    }
  }

  async readSlice(slice: SubscriberSlice, limit: number): Promise<SliceRead> {
    const sorted = this.sortedShard(`${slice.stream}#${slice.shard}`);
    const { prefix } = slice;
    // Binary search for the first hash at or after the prefix: the slice is contiguous.
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid]!.sort < prefix) lo = mid + 1;
      else hi = mid;
    }
    const subscribers: Subscription[] = [];
    let truncated = false;
    for (let i = lo; i < sorted.length && sorted[i]!.sort.startsWith(prefix); i++) {
      if (subscribers.length === limit) {
        truncated = true;
        break;
      }
      subscribers.push(sorted[i]!.subscription);
    }
    const whole = slice.shard === 0 && prefix === '';
    return {
      subscribers,
      truncated,
      ...(whole ? { spread: this.spreads.get(slice.stream) ?? 1 } : {}),
    };
  }

  /** The index is this store's own map, always caught up: what it lists is what is stored. */
  async listedInIndex(probe: IndexProbe): Promise<Subscription[]> {
    const made = (s: Subscription) => (s.subscribedAt ?? Number.NEGATIVE_INFINITY) <= probe.until;
    const out: Subscription[] = [];
    for (let shard = 0; shard < (this.spreads.get(probe.stream) ?? 1); shard++) {
      const key = `${probe.stream}#${shard}`;
      if (probe.connectionIds) {
        const entries = this.shards.get(key)?.entries;
        for (const id of probe.connectionIds) {
          const s = entries?.get(id)?.subscription;
          if (s && made(s)) out.push(s);
        }
      } else {
        const first = this.sortedShard(key).find((p) => made(p.subscription));
        if (first) out.push(first.subscription);
      }
    }
    return out;
  }

  async spreadStream(stream: string, spread: number): Promise<number> {
    if (!isSpread(spread)) {
      throw new ConfigError(
        `a stream's spread is a power of two from 1 to ${MAX_SPREAD}, got: ${spread}`,
        { variable: 'spread' },
      );
    }
    const now = Math.max(spread, this.spreads.get(stream) ?? 1);
    this.spreads.set(stream, now);
    return now;
  }

  private sortedShard(key: string): Placed[] {
    const shard = this.shards.get(key);
    if (!shard) return [];
    shard.sorted ??= [...shard.entries.values()].sort((a, b) =>
      a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : 0,
    );
    return shard.sorted;
  }

  async *changesSince(
    sinceMs: number,
    pageSize = 100,
    buckets?: readonly number[],
  ): AsyncIterable<ConnectionChange[]> {
    const all: ConnectionChange[] = [];
    const add = (id: string, bucket: number | undefined) => {
      const c = this.connections.get(id);
      // Each item once: from its own bucket (an id is listed in every bucket it was written to).
      if (c && c.changedAt >= sinceMs && (bucket === undefined || c.bucket === bucket)) {
        all.push({ kind: 'connection', connection: c.record, changedAt: c.changedAt });
      }
      for (const s of this.subscriptions.get(id)?.values() ?? []) {
        if (s.changedAt >= sinceMs && (bucket === undefined || s.bucket === bucket)) {
          all.push({ kind: 'subscription', subscription: s.subscription, changedAt: s.changedAt });
        }
      }
    };
    if (buckets) {
      for (const b of new Set(buckets)) for (const id of this.byBucket.get(b) ?? []) add(id, b);
    } else {
      for (const id of new Set([...this.connections.keys(), ...this.subscriptions.keys()])) {
        add(id, undefined);
      }
    }
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
  }

  async removeConnection(connectionId: string): Promise<Subscription[]> {
    const removed = await this.subscriptionsOf(connectionId);
    for (const placed of this.subscriptions.get(connectionId)?.values() ?? []) this.unplace(placed);
    this.connections.delete(connectionId);
    this.subscriptions.delete(connectionId);
    for (const ids of this.byBucket.values()) ids.delete(connectionId);
    return removed;
  }

  /** The bucket a write of this connection goes to now; indexed for {@link changesSince}. */
  private async bucketOf(connectionId: string): Promise<number> {
    const bucket = bucketOf(connectionId, await this.buckets());
    const ids = this.byBucket.get(bucket) ?? new Set<string>();
    ids.add(connectionId);
    this.byBucket.set(bucket, ids);
    return bucket;
  }
}
