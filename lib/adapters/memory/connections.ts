import { type Clock, systemClock } from '../../kernel/clock.js';
import { ConfigError } from '../../kernel/errors.js';
import type {
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  SliceRead,
  SubscriberSlice,
  Subscription,
} from '../../realtime/connections.js';
import { isSpread, MAX_SPREAD, shardOf, subscriberSortKey } from '../../realtime/spread.js';

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
  private readonly connections = new Map<string, { record: ConnectionRecord; changedAt: number }>();
  private readonly subscriptions = new Map<
    string,
    Map<string, { subscription: Subscription; changedAt: number; shard: string }>
  >();
  /** `<stream>#<shard>` → the shard's subscriptions, as `byStreamShard` holds them. */
  private readonly shards = new Map<string, Shard>();
  private readonly spreads = new Map<string, number>();
  private readonly clock: Clock;

  /** `clock` dates the changes ({@link changesSince}). */
  constructor(options: { clock?: Clock } = {}) {
    this.clock = options.clock ?? systemClock;
  }

  async putConnection(connection: ConnectionRecord): Promise<void> {
    this.connections.set(connection.connectionId, {
      record: connection,
      changedAt: this.clock.now(),
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

  async addSubscription(subscription: Subscription): Promise<boolean> {
    const subs = this.subscriptions.get(subscription.connectionId) ?? new Map();
    const key = `${subscription.stream}\u0000${subscription.identifier}`;
    if (subs.has(key)) return false;
    const spread = this.spreads.get(subscription.stream) ?? 1;
    const shardKey = `${subscription.stream}#${shardOf(subscription.connectionId, spread)}`;
    subs.set(key, { subscription, changedAt: this.clock.now(), shard: shardKey });
    this.subscriptions.set(subscription.connectionId, subs);
    const shard = this.shards.get(shardKey) ?? { entries: new Map(), sorted: undefined };
    shard.entries.set(`${subscription.connectionId}\u0000${subscription.identifier}`, {
      sort: subscriberSortKey(subscription.connectionId),
      subscription,
    });
    shard.sorted = undefined;
    this.shards.set(shardKey, shard);
    return true;
  }

  private unplace(placed: { subscription: Subscription; shard: string }): void {
    const shard = this.shards.get(placed.shard);
    const { connectionId, identifier } = placed.subscription;
    if (shard?.entries.delete(`${connectionId}\u0000${identifier}`)) shard.sorted = undefined;
    if (shard?.entries.size === 0) this.shards.delete(placed.shard);
  }

  async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<void> {
    const subs = this.subscriptions.get(connectionId);
    const placed = subs?.get(`${stream}\u0000${identifier}`);
    if (placed) this.unplace(placed);
    const removed = subs?.delete(`${stream}\u0000${identifier}`);
    const connection = this.connections.get(connectionId);
    if (removed && connection) connection.changedAt = this.clock.now();
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

  async *changesSince(sinceMs: number, pageSize = 100): AsyncIterable<ConnectionChange[]> {
    const all: ConnectionChange[] = [
      ...[...this.connections.values()].map(
        (c): ConnectionChange => ({
          kind: 'connection',
          connection: c.record,
          changedAt: c.changedAt,
        }),
      ),
      ...[...this.subscriptions.values()].flatMap((subs) =>
        [...subs.values()].map(
          (s): ConnectionChange => ({
            kind: 'subscription',
            subscription: s.subscription,
            changedAt: s.changedAt,
          }),
        ),
      ),
    ].filter((c) => c.changedAt >= sinceMs);
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
  }

  async removeConnection(connectionId: string): Promise<Subscription[]> {
    const removed = await this.subscriptionsOf(connectionId);
    for (const placed of this.subscriptions.get(connectionId)?.values() ?? []) this.unplace(placed);
    this.connections.delete(connectionId);
    this.subscriptions.delete(connectionId);
    return removed;
  }
}
