import { type Clock, systemClock } from '../../kernel/clock.js';
import type {
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  Subscription,
} from '../../realtime/connections.js';
import { bucketOf, MIN_BUCKETS } from '../../realtime/partitions.js';

/** An in-memory {@link ConnectionStore}. */
export class MemoryConnectionStore implements ConnectionStore {
  private readonly connections = new Map<
    string,
    { record: ConnectionRecord; changedAt: number; bucket: number }
  >();
  private readonly subscriptions = new Map<
    string,
    Map<string, { subscription: Subscription; changedAt: number; bucket: number }>
  >();
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

  async addSubscription(subscription: Subscription): Promise<boolean> {
    // B first: what follows runs without a pause, so exactly one of concurrent adds wins.
    const bucket = await this.bucketOf(subscription.connectionId);
    const subs = this.subscriptions.get(subscription.connectionId) ?? new Map();
    const key = `${subscription.stream}\u0000${subscription.identifier}`;
    if (subs.has(key)) return false;
    subs.set(key, { subscription, changedAt: this.clock.now(), bucket });
    this.subscriptions.set(subscription.connectionId, subs);
    return true;
  }

  async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<void> {
    const removed = this.subscriptions.get(connectionId)?.delete(`${stream}\u0000${identifier}`);
    const connection = this.connections.get(connectionId);
    if (removed && connection) connection.changedAt = this.clock.now();
  }

  async subscriptionsOf(connectionId: string): Promise<Subscription[]> {
    return [...(this.subscriptions.get(connectionId)?.values() ?? [])].map((s) => s.subscription);
  }

  async *subscribersOf(stream: string, pageSize = 100): AsyncIterable<Subscription[]> {
    const all = [...this.subscriptions.values()].flatMap((subs) =>
      [...subs.values()].map((s) => s.subscription).filter((s) => s.stream === stream),
    );
    for (let i = 0; i < all.length; i += pageSize) yield all.slice(i, i + pageSize);
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
