import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type SQSClient,
  type Message as SqsMessage,
} from '@aws-sdk/client-sqs';
import { AwsResourceError, errorMessage } from '../../../kernel/errors.js';
import { decodeEnvelope } from '../../../messaging/envelope.js';
import { backoffSeconds, classifyFailure } from '../../../messaging/failures.js';
import type { Consumer, Message } from '../../../messaging/types.js';
import { awsCall } from '../call.js';
import { messageGroupId } from '../relay/relay.js';
import type { ConsumedMessage } from './batch-consumer.js';
import { parkInDeadLetterQueue } from './dead-letter.js';

/** Options of {@link SqsConsumer}. */
export interface SqsConsumerOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  /**
   * Long-poll wait per receive, in seconds (0–20).
   * @default 20
   */
  readonly waitTimeSeconds?: number;
  /**
   * Messages per receive (1–10).
   * @default 10
   */
  readonly batchSize?: number;
  /**
   * Visibility while a message is processed, in seconds; extended every half of it
   * (the heartbeat) until the message is acked or nacked.
   * @default 30
   */
  readonly visibilityTimeout?: number;
  /**
   * Delay before a nacked message is redelivered, in seconds, by receive count.
   * @default `backoffSeconds` of `DEFAULT_RETRY_SCHEDULE`: 2 × 2^(receiveCount − 1), at most 120
   */
  readonly backoffSeconds?: (receiveCount: number) => number;
  /**
   * The queue's DLQ: a message that can never be handled (an undecodable envelope, or one
   * nacked with a permanent reason, `classifyFailure`) is parked there at once with its
   * body, group and why ({@link parkInDeadLetterQueue}) and deleted here. Without it such a
   * message is retried until `maxReceiveCount`, as any nack.
   * @default none
   */
  readonly deadLetterQueueUrl?: string;
  /** Logs failures. @default console */
  readonly logger?: Pick<Console, 'error' | 'warn'>;
}

/**
 * A long-polling SQS FIFO consumer for containers and scripts (like bbc `sqs-consumer`,
 * FIFO-correct): `ack` deletes (batched), `nack` makes the message visible after a
 * back-off and, after the queue's `maxReceiveCount`, its redrive policy moves it to the
 * DLQ. Messages of other groups keep flowing; `stop()` returns what is unsettled.
 */
export class SqsConsumer implements Consumer {
  private running = false;
  private abort: AbortController | undefined;
  private readonly unsettled = new Map<string, { receipt: string; heartbeat: NodeJS.Timeout }>();
  private deletes: { id: string; receipt: string; done: (error?: unknown) => void }[] = [];
  private deleting: Promise<void> | undefined;
  private readonly logger: Pick<Console, 'error' | 'warn'>;

  constructor(private readonly options: SqsConsumerOptions) {
    this.logger = options.logger ?? console;
  }

  async start(): Promise<void> {
    this.running = true;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.abort?.abort();
    // Unsettled messages go back right away instead of waiting out their visibility.
    await Promise.all(
      [...this.unsettled.keys()].map(async (id) => {
        await this.changeVisibility(id, 0).catch(() => undefined);
        this.settle(id);
      }),
    );
    while (this.deleting) await this.deleting;
  }

  async *messages(): AsyncIterable<Message> {
    while (this.running) {
      let received: SqsMessage[];
      try {
        this.abort = new AbortController();
        const out = await this.options.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: this.options.queueUrl,
            MaxNumberOfMessages: this.options.batchSize ?? 10,
            WaitTimeSeconds: this.options.waitTimeSeconds ?? 20,
            VisibilityTimeout: this.visibilityTimeout(),
            MessageSystemAttributeNames: ['ApproximateReceiveCount', 'MessageGroupId'],
          }),
          { abortSignal: this.abort.signal },
        );
        received = out.Messages ?? [];
      } catch (error) {
        if (!this.running) return;
        this.logger.error(`ReceiveMessage on ${this.options.queueUrl} failed`, error);
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      for (const m of received) {
        if (!this.running) {
          await this.changeVisibility(m.MessageId ?? '', 0, m.ReceiptHandle).catch(() => undefined);
          continue;
        }
        const message = this.toMessage(m);
        if (message) yield message;
      }
    }
  }

  private toMessage(m: SqsMessage): ConsumedMessage | undefined {
    const id = m.MessageId ?? '';
    const receipt = m.ReceiptHandle ?? '';
    const receiveCount = Number(m.Attributes?.ApproximateReceiveCount ?? '1');
    let envelope: ReturnType<typeof decodeEnvelope>;
    try {
      envelope = decodeEnvelope(m.Body ?? '', id);
    } catch (error) {
      // Never handed to the application: parked, or back-off and then the redrive policy.
      this.logger.error(`nack ${id}: ${(error as Error).message}`);
      void this.park(m, error)
        .then((parked) =>
          parked
            ? this.deleteNow(id, receipt)
            : this.changeVisibility(id, this.backoff(receiveCount), receipt),
        )
        .catch(() => undefined);
      return undefined;
    }
    const seconds = this.visibilityTimeout();
    const heartbeat = setInterval(
      () => {
        this.changeVisibility(id, seconds).catch((e) => this.logger.warn(`heartbeat ${id}`, e));
      },
      (seconds * 1000) / 2,
    );
    heartbeat.unref();
    this.unsettled.set(id, { receipt, heartbeat });
    return {
      value: envelope.payload,
      // The SQS group id: the key itself unless SQS could not take it (then its hash).
      partition: messageGroupId(envelope.key),
      offset: envelope.offset,
      id: envelope.id,
      topic: envelope.topic,
      type: envelope.type,
      headers: envelope.headers,
      timestamp: envelope.timestamp,
      receiveCount,
      replayed: envelope.replayed === true,
      ack: () => this.ack(id),
      nack: async (reason?: unknown) => {
        // The first of ack and nack settles the message (Cadence): a later call does nothing.
        if (!this.unsettled.has(id)) return;
        this.logger.error(`nack ${id}: ${errorMessage(reason)}`);
        if (await this.park(m, reason)) {
          // Parked: done here, as an ack.
          await this.ack(id);
          return;
        }
        await this.changeVisibility(id, this.backoff(receiveCount));
        this.settle(id);
      },
    };
  }

  /** Parks a permanent failure in the DLQ; false when transient, no DLQ, or parking failed. */
  private async park(m: SqsMessage, reason: unknown): Promise<boolean> {
    const dlq = this.options.deadLetterQueueUrl;
    if (!dlq || classifyFailure(reason) !== 'permanent') return false;
    try {
      await parkInDeadLetterQueue(
        this.options.sqs,
        dlq,
        {
          messageId: m.MessageId ?? '',
          body: m.Body ?? '',
          messageGroupId: m.Attributes?.MessageGroupId,
          receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? '1'),
          sourceQueue: this.options.queueUrl,
        },
        reason,
      );
      return true;
    } catch (error) {
      this.logger.error(`could not park ${m.MessageId} in the DLQ, it is retried`, error);
      return false;
    }
  }

  private ack(id: string): Promise<void> {
    const entry = this.unsettled.get(id);
    if (!entry) return Promise.resolve();
    this.settle(id);
    return this.deleteNow(id, entry.receipt);
  }

  /** Deletes a message (batched with the others of this turn). */
  private deleteNow(id: string, receipt: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.deletes.push({ id, receipt, done: (e) => (e ? reject(e) : resolve()) });
      this.deleting ??= new Promise<void>((r) => setImmediate(r))
        .then(() => this.flushDeletes())
        .finally(() => {
          this.deleting = undefined;
        });
    });
  }

  private async flushDeletes(): Promise<void> {
    while (this.deletes.length > 0) {
      const chunk = this.deletes.splice(0, 10);
      const ids = chunk.map((d) => d.id);
      try {
        const out = await awsCall('DeleteMessageBatch', this.options.queueUrl, ids, () =>
          this.options.sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: this.options.queueUrl,
              Entries: chunk.map((d, i) => ({ Id: `d${i}`, ReceiptHandle: d.receipt })),
            }),
          ),
        );
        const failed = new Map((out.Failed ?? []).map((f) => [f.Id, f]));
        chunk.forEach((d, i) => {
          const f = failed.get(`d${i}`);
          const message = `DeleteMessage on ${this.options.queueUrl} failed for ${d.id}: ${f?.Code} ${f?.Message}`;
          const resource = this.options.queueUrl;
          d.done(f ? new AwsResourceError(message, { resource, ids: [d.id] }) : undefined);
        });
      } catch (error) {
        for (const d of chunk) d.done(error);
      }
    }
  }

  private settle(id: string): void {
    const entry = this.unsettled.get(id);
    if (entry) clearInterval(entry.heartbeat);
    this.unsettled.delete(id);
  }

  private async changeVisibility(id: string, seconds: number, receipt?: string): Promise<void> {
    const handle = receipt ?? this.unsettled.get(id)?.receipt;
    if (!handle) return;
    await awsCall('ChangeMessageVisibility', this.options.queueUrl, [id], () =>
      this.options.sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.options.queueUrl,
          ReceiptHandle: handle,
          VisibilityTimeout: seconds,
        }),
      ),
    );
  }

  private visibilityTimeout(): number {
    return this.options.visibilityTimeout ?? 30;
  }

  private backoff(receiveCount: number): number {
    return (this.options.backoffSeconds ?? ((n: number) => backoffSeconds(n)))(receiveCount);
  }
}
