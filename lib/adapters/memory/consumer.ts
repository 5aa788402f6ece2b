import type { Consumer, Message } from '../../messaging/types.js';
import type { MemoryQueue, QueuedMessage } from './queue.js';

/** A consumer of one {@link MemoryQueue}: what `MemoryClient.newConsumer` returns. */
export class MemoryConsumer implements Consumer {
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
