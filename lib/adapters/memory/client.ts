import { newEventId } from '../../events/event-id.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { LambdacableError } from '../../kernel/errors.js';
import {
  type Client,
  type CloseableProducer,
  type Consumer,
  defaultRetryPolicy,
  type OutgoingMessage,
  type PublishOptions,
  type RetryPolicy,
} from '../../messaging/types.js';
import { MemoryConsumer } from './consumer.js';
import { MemoryQueue } from './queue.js';

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
