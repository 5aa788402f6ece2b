import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type SQSClient,
  type Message as SqsMessage,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { PollLoop } from './loop';

/** Options of {@link SqsPoller}. */
export interface SqsPollerOptions {
  readonly sqs: SQSClient;
  readonly lambda: LambdaClient;
  readonly queueUrl: string;
  readonly queueArn: string;
  /** The function to invoke (its deployed name). */
  readonly functionName: string;
  /** @default 10 */
  readonly batchSize?: number;
  /** Long-poll wait, in seconds. @default 1 */
  readonly waitTimeSeconds?: number;
  readonly logger?: Pick<Console, 'error' | 'info'>;
  /** Called after each invocation (each is a billed Lambda request); for benchmarks. */
  readonly onInvocation?: (invocation: PollerInvocation) => void;
}

/** One invocation a poller made, as its event source mapping would. */
export interface PollerInvocation {
  readonly functionName: string;
  /** Records in the event. */
  readonly records: number;
  /** From the invoke to its response: an upper bound of the function's billed duration. */
  readonly ms: number;
  /** The function threw or timed out. */
  readonly failed: boolean;
}

/**
 * Drives an SQS-triggered function the way Lambda's event source mapping does, for local
 * runs: receive a batch, invoke, delete what succeeded. With `ReportBatchItemFailures` the
 * records named in `batchItemFailures` stay (their visibility timeout, or the consumer's
 * back-off, brings them back and the redrive policy dead-letters them); when the
 * invocation fails, the whole batch stays.
 */
export class SqsPoller {
  private readonly logger: Pick<Console, 'error' | 'info'>;
  private readonly loop: PollLoop;

  constructor(private readonly options: SqsPollerOptions) {
    this.logger = options.logger ?? console;
    // No pause when the queue is empty: the receive's long poll waits.
    this.loop = new PollLoop({
      poll: () => this.pollOnce(),
      failure: `sqs poller (${options.functionName}) failed`,
      logger: this.logger,
      failureMs: 500,
    });
  }

  /** Polls in the background until {@link stop}. */
  start(): void {
    this.loop.start();
  }

  /** Stops after the current batch. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** One receive and, if it got anything, one invocation; returns the number of messages. */
  async pollOnce(): Promise<number> {
    const { sqs, queueUrl } = this.options;
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: this.options.batchSize ?? 10,
        WaitTimeSeconds: this.options.waitTimeSeconds ?? 1,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) return 0;
    const event = sqsEventOf(messages, this.options.queueArn);
    const invoked = performance.now();
    const out = await this.options.lambda.send(
      new InvokeCommand({
        FunctionName: this.options.functionName,
        Payload: new TextEncoder().encode(JSON.stringify(event)),
      }),
    );
    this.options.onInvocation?.({
      functionName: this.options.functionName,
      records: messages.length,
      ms: performance.now() - invoked,
      failed: out.FunctionError !== undefined,
    });
    const text = out.Payload ? new TextDecoder().decode(out.Payload) : '';
    if (out.FunctionError) {
      this.logger.error(`${this.options.functionName} failed; the batch will be retried: ${text}`);
      return messages.length;
    }
    const response = (text ? JSON.parse(text) : {}) as Partial<SQSBatchResponse> | null;
    const failed = new Set((response?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
    const done = messages.filter((m) => !failed.has(m.MessageId ?? ''));
    for (let i = 0; i < done.length; i += 10) {
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: done.slice(i, i + 10).map((m, j) => ({
            Id: `m${i + j}`,
            ReceiptHandle: m.ReceiptHandle,
          })),
        }),
      );
    }
    return messages.length;
  }
}

/** The Lambda SQS event Lambda would build from `messages` received from `queueArn`. */
export function sqsEventOf(messages: readonly SqsMessage[], queueArn: string): SQSEvent {
  return { Records: messages.map((m) => toRecord(m, queueArn)) };
}

function toRecord(m: SqsMessage, queueArn: string): SQSRecord {
  const a = m.Attributes ?? {};
  return {
    messageId: m.MessageId ?? '',
    receiptHandle: m.ReceiptHandle ?? '',
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
      SentTimestamp: a.SentTimestamp ?? '0',
      SenderId: a.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? '0',
      ...(a.MessageGroupId ? { MessageGroupId: a.MessageGroupId } : {}),
      ...(a.MessageDeduplicationId ? { MessageDeduplicationId: a.MessageDeduplicationId } : {}),
      ...(a.SequenceNumber ? { SequenceNumber: a.SequenceNumber } : {}),
    },
    messageAttributes: {},
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: 'us-east-1',
  };
}
