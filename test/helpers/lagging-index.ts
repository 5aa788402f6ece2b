import type {
  IndexProbe,
  SliceRead,
  SubscriberSlice,
  Subscription,
  SubscriptionAdd,
} from '../../lib/core';
import { shardOf, subscriberSortKey } from '../../lib/realtime/fanout/spread';
import { MemoryConnectionStore } from '../../lib/testing';
import type { FakeClock } from './clock';

/** A subscription where the index holds it: its shard and its sort key (hash). */
interface Placed {
  readonly subscription: Subscription;
  readonly shard: number;
  readonly sort: string;
}

/** How far the index lags the table, in ms of the fake clock. */
export interface IndexLag {
  readonly clock: FakeClock;
  /** How long a removed subscription is still listed; `Infinity`: it always is. */
  readonly removeMs: number;
  /** How long a stored subscription is not listed yet. @default 0 */
  readonly addMs?: number;
}

const keyOf = (connectionId: string, stream: string) => `${connectionId}\n${stream}`;

/**
 * The memory store with a stream index that lags its table, as a DynamoDB GSI does on AWS
 * and neither DynamoDB Local nor the memory store does: for `removeMs` of the fake clock after
 * a subscription is removed, every read of the index (`subscribersOf`, `readSlice`,
 * `listedInIndex`) still lists it, and for `addMs` after one is stored, none lists it yet.
 * Reads by key (`subscriptionOf`, `subscriptionsOf`) are the table's, consistent.
 */
export class LaggingIndexStore extends MemoryConnectionStore {
  /** Removed subscriptions, listed until the clock reaches `until`. */
  private readonly ghosts: (Placed & { until: number })[] = [];
  /** Stored subscriptions by connection and stream: where they sit, listed from `from`. */
  private readonly stored = new Map<string, Placed & { from: number }>();
  /** Reads of the index that listed a removed subscription. */
  staleReads = 0;

  constructor(private readonly lag: IndexLag) {
    super({ clock: lag.clock });
  }

  override async addSubscription(s: Subscription, limit?: number): Promise<SubscriptionAdd> {
    const added = await super.addSubscription(s, limit);
    if (added === 'added') {
      const spread = (await super.readSlice({ stream: s.stream, shard: 0, prefix: '' }, 0)).spread;
      this.stored.set(keyOf(s.connectionId, s.stream), {
        subscription: s,
        shard: shardOf(s.connectionId, spread ?? 1),
        sort: subscriberSortKey(s.connectionId),
        from: this.lag.clock.now() + (this.lag.addMs ?? 0),
      });
    }
    return added;
  }

  override async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<boolean> {
    const removed = await super.removeSubscription(connectionId, stream, identifier);
    if (removed) this.unlist(connectionId, stream);
    return removed;
  }

  override async removeConnection(connectionId: string): Promise<Subscription[]> {
    const removed = await super.removeConnection(connectionId);
    for (const s of removed) this.unlist(connectionId, s.stream);
    return removed;
  }

  override async *subscribersOf(stream: string, pageSize = 100): AsyncIterable<Subscription[]> {
    const spread = await this.spreadOf(stream);
    const listed: Subscription[] = [];
    for (let shard = 0; shard < spread; shard++) {
      listed.push(...(await this.shardView(stream, shard)).map((p) => p.subscription));
    }
    for (let i = 0; i < listed.length; i += pageSize) yield listed.slice(i, i + pageSize);
  }

  override async readSlice(slice: SubscriberSlice, limit: number): Promise<SliceRead> {
    const { spread } = await super.readSlice(slice, 0);
    const view = (await this.shardView(slice.stream, slice.shard)).filter((p) =>
      p.sort.startsWith(slice.prefix),
    );
    return {
      subscribers: view.slice(0, limit).map((p) => p.subscription),
      truncated: view.length > limit,
      ...(spread === undefined ? {} : { spread }),
    };
  }

  override async listedInIndex(probe: IndexProbe): Promise<Subscription[]> {
    const made = (s: Subscription) => (s.subscribedAt ?? Number.NEGATIVE_INFINITY) <= probe.until;
    const out: Subscription[] = [];
    for (let shard = 0; shard < (await this.spreadOf(probe.stream)); shard++) {
      const view = (await this.shardView(probe.stream, shard)).map((p) => p.subscription);
      if (probe.connectionIds) {
        const wanted = new Set(probe.connectionIds);
        out.push(...view.filter((s) => wanted.has(s.connectionId) && made(s)));
      } else {
        const first = view.find(made);
        if (first) out.push(first);
      }
    }
    return out;
  }

  /** A removed subscription stays listed for `removeMs`, unless it was never listed. */
  private unlist(connectionId: string, stream: string): void {
    const key = keyOf(connectionId, stream);
    const placed = this.stored.get(key);
    this.stored.delete(key);
    if (placed && placed.from <= this.lag.clock.now()) {
      this.ghosts.push({ ...placed, until: this.lag.clock.now() + this.lag.removeMs });
    }
  }

  /** One shard as the index lists it now, in hash order. */
  private async shardView(stream: string, shard: number): Promise<Placed[]> {
    const now = this.lag.clock.now();
    const live = (await super.readSlice({ stream, shard, prefix: '' }, Number.POSITIVE_INFINITY))
      .subscribers;
    const listed: Placed[] = live
      .filter((s) => (this.stored.get(keyOf(s.connectionId, stream))?.from ?? 0) <= now)
      .map((s) => ({ subscription: s, shard, sort: subscriberSortKey(s.connectionId) }));
    const ghosts = this.ghosts.filter(
      (g) => g.subscription.stream === stream && g.shard === shard && g.until > now,
    );
    if (ghosts.length > 0) this.staleReads++;
    return [...listed, ...ghosts].sort((a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : 0));
  }

  private async spreadOf(stream: string): Promise<number> {
    return (await super.readSlice({ stream, shard: 0, prefix: '' }, 0)).spread ?? 1;
  }
}
