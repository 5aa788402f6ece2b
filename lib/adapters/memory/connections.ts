import { type Clock, systemClock } from '../../kernel/clock.js';
import type {
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  Subscription,
} from '../../realtime/connections.js';

/** An in-memory {@link ConnectionStore}. */
export class MemoryConnectionStore implements ConnectionStore {
  private readonly connections = new Map<string, { record: ConnectionRecord; changedAt: number }>();
  private readonly subscriptions = new Map<
    string,
    Map<string, { subscription: Subscription; changedAt: number }>
  >();
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
    subs.set(key, { subscription, changedAt: this.clock.now() });
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
    this.connections.delete(connectionId);
    this.subscriptions.delete(connectionId);
    return removed;
  }
}
