/** Persisted ack levels per (consumer group, partition). */
export interface AckStore {
  /** The stored ack level, or `undefined` if none was saved. */
  load(group: string, partition: string): Promise<bigint | undefined>;
  /** Raises the stored level to `level`; a lower or equal level changes nothing. */
  save(group: string, partition: string, level: bigint): Promise<void>;
}

/** An in-memory {@link AckStore}. */
export class MemoryAckStore implements AckStore {
  private readonly levels = new Map<string, bigint>();

  async load(group: string, partition: string): Promise<bigint | undefined> {
    return this.levels.get(`${group}#${partition}`);
  }

  async save(group: string, partition: string, level: bigint): Promise<void> {
    const key = `${group}#${partition}`;
    const current = this.levels.get(key);
    if (current === undefined || level > current) this.levels.set(key, level);
  }
}
