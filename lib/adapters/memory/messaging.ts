import { newEventId } from '../../events/event-id.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { LambdacableError } from '../../kernel/errors.js';
import {
  type Client,
  type CloseableProducer,
  type Consumer,
  defaultRetryPolicy,
  type Message,
  type OutgoingMessage,
  type PublishOptions,
  type RetryPolicy,
} from '../../messaging/types.js';

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

/** Options of {@link MemoryClient}. */
export interface MemoryClientOptions {
  /** Application name → its topic and (optionally) consumer groups created up front. */
  readonly applications: Readonly<Record<string, { topic: string; consumers?: readonly string[] }>>;
  /** @default {@link defaultRetryPolicy} */
  readonly retry?: RetryPolicy;
  /** @default the system clock */
  readonly clock?: Clock;
  /**
   * Longest a consumer waits before polling again, in ms.
   * @default 100
   */
  readonly pollIntervalMs?: number;
}

/**
 * An in-memory {@link Client} for tests and local runs: topics fan out to one
 * {@link MemoryQueue} per consumer group; offsets come from one sequence per topic.
 */
export class MemoryClient implements Client {
  private readonly queues = new Map<string, Map<string, MemoryQueue>>();
  private readonly sequences = new Map<string, bigint>();
  private readonly retry: RetryPolicy;
  private readonly clock: Clock;

  constructor(private readonly options: MemoryClientOptions) {
    this.retry = options.retry ?? defaultRetryPolicy();
    this.clock = options.clock ?? systemClock;
    for (const app of Object.values(options.applications)) {
      for (const group of app.consumers ?? []) this.queue(app.topic, group);
    }
  }

  /** The queue of consumer group `group` on `topic`, created on first use. */
  queue(topic: string, group: string): MemoryQueue {
    let groups = this.queues.get(topic);
    if (!groups) {
      groups = new Map();
      this.queues.set(topic, groups);
    }
    let queue = groups.get(group);
    if (!queue) {
      queue = new MemoryQueue(this.retry, this.clock);
      groups.set(group, queue);
    }
    return queue;
  }

  newProducer(appName: string): CloseableProducer {
    const defaultTopic = this.topicOf(appName);
    let closed = false;
    return {
      publish: async (message: OutgoingMessage, opts?: PublishOptions) => {
        if (closed) throw new LambdacableError(`producer of ${appName} is closed`);
        this.deliver(opts?.topic ?? defaultTopic, message);
      },
      close: async () => {
        closed = true;
      },
    };
  }

  newConsumer(appName: string, consumerName: string): Consumer {
    return new MemoryConsumer(
      this.queue(this.topicOf(appName), consumerName),
      this.options.pollIntervalMs ?? 100,
    );
  }

  private deliver(topic: string, message: OutgoingMessage): void {
    const offset = (this.sequences.get(topic) ?? 0n) + 1n;
    this.sequences.set(topic, offset);
    const id = message.id ?? newEventId(this.clock.now());
    for (const queue of this.queues.get(topic)?.values() ?? []) {
      queue.enqueue({
        id,
        key: message.key,
        value: message.value,
        headers: message.headers ?? {},
        type: message.type,
        offset,
      });
    }
  }

  private topicOf(appName: string): string {
    const app = this.options.applications[appName];
    if (!app) throw new LambdacableError(`unknown application: ${appName}, configure its topic`);
    return app.topic;
  }
}

class MemoryConsumer implements Consumer {
  private running = false;
  private readonly inFlight = new Set<QueuedMessage>();

  constructor(
    private readonly queue: MemoryQueue,
    private readonly pollIntervalMs: number,
  ) {}

  async start(): Promise<void> {
    this.running = true;
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const message of this.inFlight) this.queue.release(message);
    this.inFlight.clear();
  }

  async *messages(): AsyncIterable<Message> {
    while (this.running) {
      const batch = this.queue.receive(10);
      if (batch.length === 0) {
        await this.queue.changed(this.pollIntervalMs);
        continue;
      }
      for (const queued of batch) {
        if (!this.running) {
          this.queue.release(queued);
          continue;
        }
        this.inFlight.add(queued);
        yield this.toMessage(queued);
      }
    }
  }

  private toMessage(queued: QueuedMessage): Message {
    // The first of ack and nack settles the message (Cadence): a later call does nothing.
    const settle = () => this.inFlight.delete(queued);
    return {
      value: queued.value,
      partition: queued.key,
      offset: queued.offset,
      ack: async () => {
        if (settle()) this.queue.ack(queued);
      },
      nack: async (reason?: unknown) => {
        if (settle()) this.queue.nack(queued, reason);
      },
    };
  }
}
