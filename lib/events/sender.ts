import { appendFile } from 'node:fs/promises';
import { type Clock, systemClock } from '../kernel/clock.js';
import { ConfigError, EventSenderError } from '../kernel/errors.js';
import { checkSqsBody } from '../messaging/envelope.js';
import type { Producer } from '../messaging/types.js';
import type { OutboxRecord, TxOutbox } from '../outbox/types.js';
import { AvroCodec } from './avro.js';
import type { Event, EventTopics } from './event.js';
import { newEventId } from './event-id.js';
import type { SchemaRegistry } from './schema-registry.js';

/** Counters of an {@link EventSender}. */
export interface SenderStats {
  /** Events handed on by `sendAsync` (to the producer, or to the file sink when there is none). */
  readonly sent: number;
  /** Events dropped by `sendAsync` because the buffer was full or the sender closed. */
  readonly dropped: number;
  /** Events `sendAsync` refused (unregistered, invalid, over a limit) or could not hand on. */
  readonly failed: number;
  /** Events waiting in the buffer. */
  readonly buffered: number;
  /** Events the file sink could not write. */
  readonly sinkFailed: number;
}

/** What {@link EventSender.close} could and could not flush. */
export interface SenderCloseReport {
  readonly sent: number;
  readonly failed: number;
  readonly dropped: number;
  readonly sinkFailed: number;
  /** Events still buffered when `close` returned (its `timeoutMs` passed first). */
  readonly unflushed: number;
  /** Whether every event `sendAsync` was given went out: nothing failed, dropped or left. */
  readonly complete: boolean;
}

/** Options of {@link EventSender.close}. */
export interface CloseOptions {
  /**
   * Milliseconds to wait for the buffer to drain; what is left is reported as `unflushed`.
   * @default no limit: waits until every buffered event is handed on or failed
   */
  readonly timeoutMs?: number;
}

/** Sends events (flachnetz `EventSender`). */
export interface EventSender<Tx = unknown> {
  /**
   * Buffers `event` for delivery; never blocks, throws or rejects: a refused event (over a
   * limit, invalid) or a failure to hand it on goes to `onError` and is counted.
   */
  sendAsync<T>(event: Event<T>): void;
  /**
   * Adds `event` to the caller's transaction: committed ⇒ delivered, rolled back ⇒ never.
   * Throws, adding nothing, for an event that could not reach its consumers
   * (`LimitExceededError`, `EncodeError`, `UnknownEventTypeError`).
   */
  sendInTx<T>(tx: Tx, event: Event<T>): Promise<void>;
  /**
   * Tells the sender that `tx` committed: the file sink gets its events. Needed only for an
   * outbox that does not see the commit (DynamoDB); never throws.
   */
  afterCommit(tx: Tx): Promise<void>;
  /** Waits until everything buffered is handed on (or `timeoutMs`); later `sendAsync` calls are dropped. */
  close(options?: CloseOptions): Promise<SenderCloseReport>;
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
  /**
   * A file that gets one JSON line per event, for local debugging: a `sendAsync` event once
   * handed on, a `sendInTx` event once its transaction committed (the outbox's `onCommit`, or
   * {@link EventSender.afterCommit}). A failed write is counted (`sinkFailed`), never thrown.
   */
  readonly fileSink?: string;
  /**
   * Events `sendAsync` buffers before it drops.
   * @default 1024
   */
  readonly bufferSize?: number;
  /** @default the system clock */
  readonly clock?: Clock;
  /**
   * Called for every event `sendAsync` could not hand on and every line the file sink could
   * not write; what it throws is ignored. @default console.error
   */
  readonly onError?: (error: unknown, record: Partial<OutboxRecord>) => void;
}

const EMPTY_REPORT: SenderCloseReport = {
  sent: 0,
  failed: 0,
  dropped: 0,
  sinkFailed: 0,
  unflushed: 0,
  complete: true,
};

/** A sender that discards everything. */
export class NoopEventSender implements EventSender<unknown> {
  sendAsync(): void {}
  async sendInTx(): Promise<void> {}
  async afterCommit(): Promise<void> {}
  async close(): Promise<SenderCloseReport> {
    return EMPTY_REPORT;
  }
  stats(): SenderStats {
    return { sent: 0, dropped: 0, failed: 0, buffered: 0, sinkFailed: 0 };
  }
}

/**
 * Prepares an {@link EventSender} (flachnetz `NewInitializer`): `initialize()` registers
 * every event type's schema once and returns the sender; `close()` closes it when it was
 * initialized, and is a no-op reporting nothing otherwise (flachnetz `EventSenderInitializer.Close`).
 */
export function createEventSender<Tx = unknown>(
  options: EventSenderOptions<Tx>,
): {
  initialize(): Promise<EventSender<Tx>>;
  close(closeOptions?: CloseOptions): Promise<SenderCloseReport>;
} {
  let initializing: Promise<EventSender<Tx>> | undefined;
  return {
    async initialize() {
      if (initializing) throw new EventSenderError('event sender is already initialized');
      initializing = (async () => {
        const codec = new AvroCodec(options.registry);
        for (const type of options.topics.types()) await codec.register(type);
        return new BufferedEventSender(options, codec);
      })();
      return initializing;
    },
    async close(closeOptions) {
      // A failed initialize left nothing to close.
      const sender = await initializing?.catch(() => undefined);
      return sender ? sender.close(closeOptions) : EMPTY_REPORT;
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
  private sinkFailed = 0;
  /** `sendInTx` records waiting for {@link afterCommit}, by transaction. */
  private readonly uncommitted = new WeakMap<object, OutboxRecord[]>();
  private readonly bufferSize: number;
  private readonly clock: Clock;

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
      this.report(error, { type: event.type.name });
      return;
    }
    this.buffer.push(record);
    this.pumping ??= this.pump().finally(() => {
      this.pumping = undefined;
    });
  }

  async sendInTx<T>(tx: Tx, event: Event<T>): Promise<void> {
    const outbox = this.options.outbox;
    if (!outbox) {
      throw new EventSenderError('sendInTx needs an outbox: pass one to createEventSender');
    }
    const record = this.toRecord(event);
    outbox.addToTx(tx, record);
    if (!this.options.fileSink) return;
    // The sink shows what was committed: its line waits for the commit.
    if (outbox.onCommit) {
      outbox.onCommit(tx, () => this.writeFile([record]));
    } else if (typeof tx === 'object' && tx !== null) {
      const waiting = this.uncommitted.get(tx) ?? [];
      waiting.push(record);
      this.uncommitted.set(tx, waiting);
    } else {
      this.sinkFailed++;
      this.report(new EventSenderError('the file sink needs an object as transaction'), record);
    }
  }

  async afterCommit(tx: Tx): Promise<void> {
    if (typeof tx !== 'object' || tx === null) return;
    const records = this.uncommitted.get(tx);
    if (!records) return;
    this.uncommitted.delete(tx);
    await this.writeFile(records);
  }

  async close(options: CloseOptions = {}): Promise<SenderCloseReport> {
    this.closed = true;
    const drained = (async () => {
      while (this.pumping) await this.pumping;
    })();
    if (options.timeoutMs === undefined) {
      await drained;
    } else {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, options.timeoutMs);
      });
      await Promise.race([drained, timeout]);
      clearTimeout(timer);
    }
    const unflushed = this.buffer.length;
    return {
      sent: this.sent,
      failed: this.failed,
      dropped: this.dropped,
      sinkFailed: this.sinkFailed,
      unflushed,
      complete: unflushed === 0 && this.failed === 0 && this.dropped === 0 && this.sinkFailed === 0,
    };
  }

  stats(): SenderStats {
    return {
      sent: this.sent,
      dropped: this.dropped,
      failed: this.failed,
      buffered: this.buffer.length,
      sinkFailed: this.sinkFailed,
    };
  }

  /**
   * The outbox record of `event`; throws for an event that could not reach its consumers:
   * unregistered, invalid, refused by its type's `check`, or an SQS body over the limit.
   */
  private toRecord<T>(event: Event<T>): OutboxRecord {
    const metadata = this.options.topics.metadataOf(event);
    event.type.check(event.value);
    const payload = this.codec.encodeSync(event.type, event.value);
    const timestamp = this.clock.now();
    const id = newEventId(timestamp);
    const record = { ...metadata, key: metadata.key ?? id, id, payload, timestamp };
    checkSqsBody(record);
    return record;
  }

  /** Hands the buffer on in chunks; never rejects (every failure is counted and reported). */
  private async pump(): Promise<void> {
    // Yield once so a burst of synchronous sendAsync calls is handed on together.
    await Promise.resolve();
    while (this.buffer.length > 0) {
      const chunk = this.buffer.slice(0, PUBLISH_CHUNK);
      const handedOn = await Promise.all(chunk.map((record) => this.handOn(record)));
      await this.writeFile(
        chunk.filter((_, i) => handedOn[i]),
        !this.options.producer,
      );
      // Removed only after handing on, so `buffered` counts what is not yet delivered.
      this.buffer = this.buffer.slice(chunk.length);
    }
  }

  /** Publishes `record`; whether it was handed on (to the producer, or else to the sink). */
  private async handOn(record: OutboxRecord): Promise<boolean> {
    const producer = this.options.producer;
    if (!producer) {
      if (this.options.fileSink) return true;
      this.failed++;
      this.report(new EventSenderError('sendAsync needs a producer or a fileSink'), record);
      return false;
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
      return true;
    } catch (error) {
      this.failed++;
      this.report(error, record);
      return false;
    }
  }

  /**
   * Appends one line per record to the file sink; never rejects. `delivers`: the sink is
   * where these records go (sendAsync without a producer), so a written line counts as sent.
   */
  private async writeFile(records: readonly OutboxRecord[], delivers = false): Promise<void> {
    const path = this.options.fileSink;
    if (!path || records.length === 0) return;
    try {
      const lines = records.map((r) => {
        const type = this.options.topics.typeOf(r.type);
        const value = JSON.parse(
          type.avroType.toString(type.avroType.fromBuffer(Buffer.from(r.payload.subarray(5)))),
        );
        return `${JSON.stringify({ type: r.type, topic: r.topic, key: r.key, headers: r.headers, timestamp: r.timestamp, payload: value })}\n`;
      });
      await appendFile(path, lines.join(''));
      if (delivers) this.sent += records.length;
    } catch (error) {
      this.sinkFailed += records.length;
      for (const r of records) this.report(error, r);
    }
  }

  /** Calls `onError`; what it throws must not reach the caller's process. */
  private report(error: unknown, record: Partial<OutboxRecord>): void {
    try {
      (this.options.onError ?? defaultOnError)(error, record);
    } catch {
      // onError is the last resort: nothing else to tell.
    }
  }
}

function defaultOnError(error: unknown, record: Partial<OutboxRecord>): void {
  console.error('event not sent', record.type, error);
}
