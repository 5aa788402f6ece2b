/** A consumed message: Kafka-like view of an SQS FIFO message. */
export interface Message {
  /** The payload (for events: Confluent-framed Avro). */
  readonly value: Uint8Array;
  /** The SQS MessageGroupId, i.e. the event key. */
  readonly partition: string;
  /** Increases within a partition; the same on every redelivery. */
  readonly offset: bigint;
  /** Marks the message done: it is deleted and never delivered again. */
  ack(): Promise<void>;
  /** Marks the message failed: it is retried with back-off, then dead-lettered. */
  nack(reason?: unknown): Promise<void>;
}

/** A message to publish. */
export interface OutgoingMessage {
  /** The partition key: messages with one key are delivered in order. */
  readonly key: string;
  /** The payload. */
  readonly value: Uint8Array;
  /** Free-form string headers carried with the message. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The event type name, when the payload is an event. */
  readonly type?: string;
  /** A unique, time-ordered id; generated when absent. Duplicates are recognised by it. */
  readonly id?: string;
}

/** Per-call publish options. */
export interface PublishOptions {
  /** Publish to this topic instead of the producer's application topic. */
  readonly topic?: string;
}

/** Publishes messages to a topic. */
export interface Producer {
  /** Hands `message` on for delivery to every consumer group of the topic. */
  publish(message: OutgoingMessage, opts?: PublishOptions): Promise<void>;
}

/** A producer that holds resources. */
export interface CloseableProducer extends Producer {
  /** Flushes what is buffered and releases resources. */
  close(): Promise<void>;
}

/** Consumes one consumer group's messages. */
export interface Consumer {
  /** Starts receiving. */
  start(): Promise<void>;
  /** Stops receiving; in-flight messages finish or return to the queue. */
  stop(): Promise<void>;
  /** The received messages; ends after `stop()`. */
  messages(): AsyncIterable<Message>;
}

/** Creates producers and consumers for named applications. */
export interface Client {
  /** A consumer for consumer group `consumerName` of application `appName`'s topic. */
  newConsumer(appName: string, consumerName: string): Consumer;
  /** A producer for application `appName`'s topic. */
  newProducer(appName: string): CloseableProducer;
}

/** Retry policy for nacked messages. */
export interface RetryPolicy {
  /**
   * Deliveries after which a nacked message moves to the dead-letter queue.
   * @default 5
   */
  readonly maxReceiveCount: number;
  /**
   * Delay before redelivery after the `receiveCount`-th failed delivery, in ms.
   * @default exponential, 1 s doubling up to 5 min
   */
  readonly backoff: (receiveCount: number) => number;
}

/** Exponential back-off: `base × 2^(n-1)`, capped. */
export function exponentialBackoff(
  baseMs = 1000,
  maxMs = 300_000,
): (receiveCount: number) => number {
  return (receiveCount) => Math.min(maxMs, baseMs * 2 ** Math.max(0, receiveCount - 1));
}

/** The default {@link RetryPolicy}: 5 deliveries, 1 s doubling back-off. */
export function defaultRetryPolicy(): RetryPolicy {
  return { maxReceiveCount: 5, backoff: exponentialBackoff() };
}
