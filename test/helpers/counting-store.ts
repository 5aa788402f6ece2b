import type { ConnectionChange } from '../../lib/core';
import { MemoryConnectionStore } from '../../lib/testing';

/** The in-memory store, counting what a reader (the pinger) reads from it. */
export class CountingStore extends MemoryConnectionStore {
  /** Each `changesSince` call: its `since` and the items it returned. */
  changeReads: { since: number; items: number }[] = [];
  subscriptionReads = 0;

  /** Items returned by every `changesSince` so far. */
  get itemsRead(): number {
    return this.changeReads.reduce((n, r) => n + r.items, 0);
  }

  override async *changesSince(sinceMs: number, pageSize?: number) {
    const read = { since: sinceMs, items: 0 };
    this.changeReads.push(read);
    for await (const page of super.changesSince(sinceMs, pageSize)) {
      read.items += page.length;
      yield page as ConnectionChange[];
    }
  }

  override async subscriptionsOf(connectionId: string) {
    this.subscriptionReads++;
    return super.subscriptionsOf(connectionId);
  }
}
