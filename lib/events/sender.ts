import { appendFile } from 'node:fs/promises';
import { type Clock, systemClock } from '../kernel/clock.js';
import { ConfigError, EventSenderError } from '../kernel/errors.js';
import type { Producer } from '../messaging/types.js';
import type { OutboxRecord, TxOutbox } from '../outbox/types.js';
import { AvroCodec } from './avro.js';
import type { Event, EventTopics } from './event.js';
import { newEventId } from './event-id.js';
import type { SchemaRegistry } from './schema-registry.js';

/** Counters of an {@link EventSender}. */
export interface SenderStats {
  /** Events handed on by `sendAsync`. */
  readonly sent: number;
  /** Events dropped by `sendAsync` because the buffer was full. */
  readonly dropped: number;
  /** Events `sendAsync` could not encode or hand on. */
  readonly failed: number;
  /** Events waiting in the buffer. */
  readonly buffered: number;
}

/** Sends events (flachnetz `EventSender`). */
export interface EventSender<Tx = unknown> {
  /** Buffers `event` for delivery; never blocks or throws (drops and counts when full). */
  sendAsync<T>(event: Event<T>): void;
  /** Adds `event` to the caller's transaction: committed ⇒ delivered, rolled back ⇒ never. */
  sendInTx<T>(tx: Tx, event: Event<T>): Promise<void>;
  /** Waits until everything buffered is handed on; later `sendAsync` calls are dropped. */
  close(): Promise<void>;
  /** The counters. */
  stats(): SenderStats;
}

/** Options of {@link createEventSender}. */
export interface EventSenderOptions<Tx> {
  /** The registered event types. */
  readonly topics: EventTopics;
  /** Where schemas get their ids. */
  readonly registry: SchemaRegistry;
  /** Receives `sendAsync` events. */
  readonly producer?: Producer;
  /** Adds `sendInTx` events to transactions. */
  readonly outbox?: TxOutbox<Tx>;
  /** A file that gets one JSON line per event, for local debugging. */
  readonly fileSink?: string;
  /**
   * Events `sendAsync` buffers before it drops.
   * @default 1024
   */
  readonly bufferSize?: number;
  /** @default the system clock */
  readonly clock?: Clock;
  /** Called for every event `sendAsync` could not hand on. @default console.error */
  readonly onError?: (error: unknown, record: Partial<OutboxRecord>) => void;
}

/** A sender that discards everything. */
export class NoopEventSender implements EventSender<unknown> {
  sendAsync(): void {}
  async sendInTx(): Promise<void> {}
  async close(): Promise<void> {}
  stats(): SenderStats {
    return { sent: 0, dropped: 0, failed: 0, buffered: 0 };
  }
}

/**
 * Prepares an {@link EventSender} (flachnetz `NewInitializer`): `initialize()` registers
 * every event type's schema once and returns the sender.
 */
export function createEventSender<Tx = unknown>(
  options: EventSenderOptions<Tx>,
): { initialize(): Promise<EventSender<Tx>> } {
  let initialized = false;
  return {
    async initialize() {
      if (initialized) throw new EventSenderError('event sender is already initialized');
      initialized = true;
      const codec = new AvroCodec(options.registry);
      for (const type of options.topics.types()) await codec.register(type);
      return new BufferedEventSender(options, codec);
    },
  };
}

const PUBLISH_CHUNK = 25;

class BufferedEventSender<Tx> implements EventSender<Tx> {
  private buffer: OutboxRecord[] = [];
  private pumping: Promise<void> | undefined;
  private closed = false;
  private sent = 0;
  private dropped = 0;
  private failed = 0;
  private readonly bufferSize: number;
  private readonly clock: Clock;
  private readonly onError: (error: unknown, record: Partial<OutboxRecord>) => void;

  constructor(
    private readonly options: EventSenderOptions<Tx>,
    private readonly codec: AvroCodec,
  ) {
    this.bufferSize = options.bufferSize ?? 1024;
    if (!Number.isInteger(this.bufferSize) || this.bufferSize < 1) {
      throw new ConfigError(`bufferSize must be a positive integer, got: ${options.bufferSize}`, {
        variable: 'bufferSize',
      });
    }
    this.clock = options.clock ?? systemClock;
    this.onError =
      options.onError ?? ((error, record) => console.error('event not sent', record.type, error));
  }

  sendAsync<T>(event: Event<T>): void {
    if (this.closed || this.buffer.length >= this.bufferSize) {
      this.dropped++;
      return;
    }
    let record: OutboxRecord;
    try {
      record = this.toRecord(event);
    } catch (error) {
      this.failed++;
      this.onError(error, { type: event.type.name });
      return;
    }
    this.buffer.push(record);
    this.pumping ??= this.pump().finally(() => {
      this.pumping = undefined;
    });
  }

  async sendInTx<T>(tx: Tx, event: Event<T>): Promise<void> {
    if (!this.options.outbox) {
      throw new EventSenderError('sendInTx needs an outbox: pass one to createEventSender');
    }
    const record = this.toRecord(event);
    this.options.outbox.addToTx(tx, record);
    await this.writeFile([record]);
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.pumping) await this.pumping;
  }

  stats(): SenderStats {
    return {
      sent: this.sent,
      dropped: this.dropped,
      failed: this.failed,
      buffered: this.buffer.length,
    };
  }

  private toRecord<T>(event: Event<T>): OutboxRecord {
    const metadata = this.options.topics.metadataOf(event);
    const payload = this.codec.encodeSync(event.type, event.value);
    const timestamp = this.clock.now();
    const id = newEventId(timestamp);
    return { ...metadata, key: metadata.key ?? id, id, payload, timestamp };
  }

  private async pump(): Promise<void> {
    // Yield once so a burst of synchronous sendAsync calls is handed on together.
    await Promise.resolve();
    while (this.buffer.length > 0) {
      const chunk = this.buffer.slice(0, PUBLISH_CHUNK);
      await Promise.all(chunk.map((record) => this.handOn(record)));
      await this.writeFile(chunk);
      // Removed only after handing on, so `buffered` counts what is not yet delivered.
      this.buffer = this.buffer.slice(chunk.length);
    }
  }

  private async handOn(record: OutboxRecord): Promise<void> {
    const producer = this.options.producer;
    if (!producer) {
      if (this.options.fileSink) this.sent++;
      return;
    }
    try {
      await producer.publish(
        {
          id: record.id,
          key: record.key,
          value: record.payload,
          headers: record.headers,
          type: record.type,
        },
        { topic: record.topic },
      );
      this.sent++;
    } catch (error) {
      this.failed++;
      this.onError(error, record);
    }
  }

  private async writeFile(records: readonly OutboxRecord[]): Promise<void> {
    const path = this.options.fileSink;
    if (!path) return;
    const lines = records.map((r) => {
      const type = this.options.topics.typeOf(r.type);
      const value = JSON.parse(
        type.avroType.toString(type.avroType.fromBuffer(Buffer.from(r.payload.subarray(5)))),
      );
      return `${JSON.stringify({ type: r.type, topic: r.topic, key: r.key, headers: r.headers, timestamp: r.timestamp, payload: value })}\n`;
    });
    await appendFile(path, lines.join(''));
  }
}
