/** One event as written to the outbox: everything the relay needs to deliver it. */
export interface OutboxRecord {
  /** Unique, time-ordered; the SQS deduplication id. */
  readonly id: string;
  readonly topic: string;
  /** The partition key: the SQS MessageGroupId. */
  readonly key: string;
  /** The event type name; empty for raw messages. */
  readonly type: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Confluent-framed Avro for events, any bytes for raw messages. */
  readonly payload: Uint8Array;
  /** Creation time in milliseconds. */
  readonly timestamp: number;
}

/** Adds outbox records to a transaction of type `Tx` that the caller commits. */
export interface TxOutbox<Tx> {
  /** Adds the record's write to `tx`; nothing is sent until the caller commits. */
  addToTx(tx: Tx, record: OutboxRecord): void;
  /**
   * Runs `action` once `tx` has committed, never when it rolls back. Only an outbox that
   * sees the commit implements it (the memory outbox); for the others (DynamoDB, where the
   * caller sends `TransactWriteItems`) the caller says so with `EventSender.afterCommit(tx)`.
   */
  onCommit?(tx: Tx, action: () => Promise<void>): void;
}
