import { AckManagerError } from '../kernel/errors.js';

/**
 * Tracks read and acknowledged ids of one ordered sequence (Cadence `common/messaging`
 * semantics). The ack level is the highest id below which everything read has been acked.
 *
 * Outstanding ids are kept in read order, so an ack costs O(1) amortised whatever the
 * gaps between ids (SQS sequence numbers jump by ~10^10): ids never read are skipped,
 * never scanned.
 */
export class AckManager {
  private readLevel = -1n;
  private ackLevel = -1n;
  /** Outstanding ids in increasing order; `head` is the first still in the window. */
  private ids: bigint[] = [];
  private head = 0;
  /** id → acked? for ids in the window. */
  private readonly outstanding = new Map<bigint, boolean>();
  private backlog = 0;

  /** Marks `id` as read; ids must increase. Throws {@link AckManagerError} for an id `<=` the read level. */
  readItem(id: bigint): void {
    if (id <= this.readLevel) {
      throw new AckManagerError(
        `next item id is less than or equal to the read level: ${id} <= ${this.readLevel}`,
        { id },
      );
    }
    if (this.ackLevel === -1n) this.ackLevel = id - 1n;
    this.readLevel = id;
    this.ids.push(id);
    this.outstanding.set(id, false);
    this.backlog++;
  }

  /** Acks `id` and returns the new ack level; an unknown or already acked id changes nothing. */
  ackItem(id: bigint): bigint {
    if (this.outstanding.get(id) !== false) return this.ackLevel;
    this.outstanding.set(id, true);
    this.backlog--;
    while (this.head < this.ids.length) {
      const next = this.ids[this.head]!;
      if (this.outstanding.get(next) !== true) break;
      this.outstanding.delete(next);
      this.ackLevel = next;
      this.head++;
    }
    this.compact();
    return this.ackLevel;
  }

  /** The highest id read so far, `-1n` before the first read. */
  getReadLevel(): bigint {
    return this.readLevel;
  }

  /** Sets the read level; it cannot go below an outstanding id (that would reorder the window). */
  setReadLevel(level: bigint): void {
    const last = this.ids.length > this.head ? this.ids[this.ids.length - 1]! : undefined;
    if (last !== undefined && level < last) {
      throw new AckManagerError(
        `read level cannot go below an outstanding id: ${level} < ${last}`,
        { id: level },
      );
    }
    this.readLevel = level;
  }

  /** The highest id up to which everything read is acked, `-1n` before the first read. */
  getAckLevel(): bigint {
    return this.ackLevel;
  }

  /**
   * Raises (never lowers) the ack level and lifts the read level to it if lower.
   * Outstanding ids at or below the new level count as acked.
   */
  setAckLevel(level: bigint): void {
    if (level <= this.ackLevel) return;
    this.ackLevel = level;
    if (this.readLevel < level) this.readLevel = level;
    while (this.head < this.ids.length && this.ids[this.head]! <= level) {
      const id = this.ids[this.head]!;
      if (this.outstanding.get(id) === false) this.backlog--;
      this.outstanding.delete(id);
      this.head++;
    }
    this.compact();
  }

  /** How many ids were read and not yet acked. */
  getBacklogCount(): number {
    return this.backlog;
  }

  /** The ids read and not yet acked, in increasing order (the holes above the ack level). */
  getOutstandingIds(): bigint[] {
    const out: bigint[] = [];
    for (let i = this.head; i < this.ids.length; i++) {
      const id = this.ids[i]!;
      if (this.outstanding.get(id) === false) out.push(id);
    }
    return out;
  }

  private compact(): void {
    // Drop the consumed prefix once it dominates, keeping pushes and shifts amortised O(1).
    if (this.head > 1024 && this.head * 2 > this.ids.length) {
      this.ids = this.ids.slice(this.head);
      this.head = 0;
    }
  }
}

/** One {@link AckManager} per partition (an SQS message group), created on its first read. */
export class PartitionAckManager {
  private readonly managers = new Map<string, AckManager>();

  /** Marks `id` of `partition` as read, creating that partition's manager on first use. */
  readItem(partition: string, id: bigint): void {
    let manager = this.managers.get(partition);
    if (!manager) {
      manager = new AckManager();
      this.managers.set(partition, manager);
    }
    manager.readItem(id);
  }

  /** Acks `id` of `partition` and returns its new ack level; a partition never read throws. */
  complete(partition: string, id: bigint): bigint {
    const manager = this.managers.get(partition);
    if (!manager) {
      throw new AckManagerError(`partition was never read: ${partition}`, { id, partition });
    }
    return manager.ackItem(id);
  }

  /** The ack level of `partition`, or `undefined` for a partition never read. */
  ackLevel(partition: string): bigint | undefined {
    return this.managers.get(partition)?.getAckLevel();
  }

  /** The manager of `partition`, if it was read. */
  get(partition: string): AckManager | undefined {
    return this.managers.get(partition);
  }

  /** Partitions read so far. */
  partitions(): string[] {
    return [...this.managers.keys()];
  }
}
