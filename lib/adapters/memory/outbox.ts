import type { Producer } from '../../messaging/types.js';
import type { OutboxRecord, TxOutbox } from '../../outbox/types.js';

/** A transaction of the {@link MemoryOutbox}: records are delivered only on commit. */
export class MemoryTransaction {
  readonly records: OutboxRecord[] = [];
  private done = false;

  constructor(private readonly producer: Producer) {}

  /** Delivers every record added; a second commit or a commit after rollback does nothing. */
  async commit(): Promise<void> {
    if (this.done) return;
    this.done = true;
    for (const r of this.records) {
      await this.producer.publish(
        { id: r.id, key: r.key, value: r.payload, headers: r.headers, type: r.type },
        { topic: r.topic },
      );
    }
  }

  /** Discards every record added. */
  rollback(): void {
    this.done = true;
    this.records.length = 0;
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
}
