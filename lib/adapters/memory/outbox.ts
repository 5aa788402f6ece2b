import type { Producer } from '../../messaging/types.js';
import type { OutboxRecord, TxOutbox } from '../../outbox/types.js';

/** A transaction of the {@link MemoryOutbox}: records are delivered only on commit. */
export class MemoryTransaction {
  readonly records: OutboxRecord[] = [];
  private readonly committed: (() => Promise<void>)[] = [];
  private done = false;

  constructor(private readonly producer: Producer) {}

  /**
   * Delivers every record added, then runs the actions registered with
   * {@link MemoryOutbox.onCommit}; a second commit or a commit after rollback does nothing.
   */
  async commit(): Promise<void> {
    if (this.done) return;
    this.done = true;
    for (const r of this.records) {
      await this.producer.publish(
        { id: r.id, key: r.key, value: r.payload, headers: r.headers, type: r.type },
        { topic: r.topic },
      );
    }
    for (const action of this.committed.splice(0)) await action();
  }

  /** Discards every record added, and the actions waiting for the commit. */
  rollback(): void {
    this.done = true;
    this.records.length = 0;
    this.committed.length = 0;
  }

  /** Runs `action` after a commit (internal: {@link MemoryOutbox.onCommit}). */
  afterCommit(action: () => Promise<void>): void {
    if (!this.done) this.committed.push(action);
  }
}

/** An in-memory transactional outbox over a {@link Producer}, for tests and local runs. */
export class MemoryOutbox implements TxOutbox<MemoryTransaction> {
  constructor(private readonly producer: Producer) {}

  /** A new transaction. */
  begin(): MemoryTransaction {
    return new MemoryTransaction(this.producer);
  }

  addToTx(tx: MemoryTransaction, record: OutboxRecord): void {
    tx.records.push(record);
  }

  onCommit(tx: MemoryTransaction, action: () => Promise<void>): void {
    tx.afterCommit(action);
  }
}
