import { type Clock, systemClock } from '../../kernel/clock.js';
import { defaultRetryPolicy, type RetryPolicy } from '../../messaging/types.js';

/** A message held by a {@link MemoryQueue}. */
export interface QueuedMessage {
  readonly id: string;
  readonly key: string;
  readonly value: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  readonly type: string | undefined;
  readonly offset: bigint;
  receiveCount: number;
  visibleAt: number;
  inFlight: boolean;
}

/** A message moved to the dead-letter list, with the reason of its last failure. */
export interface DeadLetter {
  readonly message: QueuedMessage;
  readonly reason: unknown;
}

/**
 * An in-memory FIFO queue with SQS FIFO semantics: one message in flight per group,
 * later messages of a group wait for its head, other groups go on; nack delays the
 * head by the back-off and dead-letters it after `maxReceiveCount` deliveries.
 */
export class MemoryQueue {
  private readonly groups = new Map<string, QueuedMessage[]>();
  private readonly seen = new Set<string>();
  private readonly waiters = new Set<() => void>();
  /** Messages that exhausted their deliveries, oldest first. */
  readonly deadLetters: DeadLetter[] = [];

  constructor(
    private readonly retry: RetryPolicy = defaultRetryPolicy(),
    private readonly clock: Clock = systemClock,
  ) {}

  /** Appends a message; a repeated id is dropped (FIFO deduplication). */
  enqueue(message: Omit<QueuedMessage, 'receiveCount' | 'visibleAt' | 'inFlight'>): void {
    if (this.seen.has(message.id)) return;
    this.seen.add(message.id);
    const group = this.groups.get(message.key) ?? [];
    group.push({ ...message, receiveCount: 0, visibleAt: 0, inFlight: false });
    this.groups.set(message.key, group);
    this.wake();
  }

  /** Takes up to `max` visible group heads, marking them in flight. */
  receive(max = 10): QueuedMessage[] {
    const now = this.clock.now();
    const out: QueuedMessage[] = [];
    for (const group of this.groups.values()) {
      const head = group[0];
      if (!head || head.inFlight || head.visibleAt > now) continue;
      head.inFlight = true;
      head.receiveCount++;
      out.push(head);
      if (out.length >= max) break;
    }
    return out;
  }

  /** Removes an in-flight message. */
  ack(message: QueuedMessage): void {
    const group = this.groups.get(message.key);
    if (!group || group[0] !== message || !message.inFlight) return;
    group.shift();
    if (group.length === 0) this.groups.delete(message.key);
    this.wake();
  }

  /** Fails an in-flight message: redelivered after the back-off, or dead-lettered. */
  nack(message: QueuedMessage, reason?: unknown): void {
    const group = this.groups.get(message.key);
    if (!group || group[0] !== message || !message.inFlight) return;
    message.inFlight = false;
    if (message.receiveCount >= this.retry.maxReceiveCount) {
      group.shift();
      if (group.length === 0) this.groups.delete(message.key);
      this.deadLetters.push({ message, reason });
    } else {
      message.visibleAt = this.clock.now() + this.retry.backoff(message.receiveCount);
    }
    this.wake();
  }

  /** Returns an in-flight message without counting the delivery (graceful stop). */
  release(message: QueuedMessage): void {
    if (!message.inFlight) return;
    message.inFlight = false;
    message.receiveCount--;
    this.wake();
  }

  /**
   * Moves every dead letter back to the end of its group, as a DLQ redrive
   * (`StartMessageMoveTask`) does: same id, key and offset, deliveries counted afresh.
   * Returns how many moved.
   */
  redrive(): number {
    const moved = this.deadLetters.splice(0, this.deadLetters.length);
    for (const { message } of moved) {
      const group = this.groups.get(message.key) ?? [];
      group.push({ ...message, receiveCount: 0, visibleAt: 0, inFlight: false });
      this.groups.set(message.key, group);
    }
    if (moved.length > 0) this.wake();
    return moved.length;
  }

  /** Messages waiting or in flight. */
  size(): number {
    let n = 0;
    for (const group of this.groups.values()) n += group.length;
    return n;
  }

  /** The earliest time a waiting head becomes visible, or `undefined` if none waits. */
  nextVisibleAt(): number | undefined {
    let next: number | undefined;
    for (const group of this.groups.values()) {
      const head = group[0];
      if (head && !head.inFlight && (next === undefined || head.visibleAt < next))
        next = head.visibleAt;
    }
    return next;
  }

  /** Resolves on the next enqueue, ack, nack or release, or after `timeoutMs`. */
  changed(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
