import {
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
  type Message as SqsMessage,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse } from 'aws-lambda';
import { sqsEventOf } from '../../infra/local/pollers/sqs';
import { type BatchConsumerOptions, type ConsumedMessage, consumeSqsBatch } from '../../lib/aws';

/**
 * One invocation of an SQS-triggered consumer the way Lambda's event source mapping runs
 * it (as `infra/local/pollers/sqs.ts` does): receive a batch, `consumeSqsBatch`, delete what
 * succeeded. A rejected invocation (`consumeSqsBatch` or the wrapper throwing) deletes
 * nothing: the whole batch comes back after its visibility timeout.
 */
export async function invokeOnSqs(
  sqs: SQSClient,
  queue: { url: string; arn: string },
  handler: (m: ConsumedMessage) => Promise<void>,
  options: BatchConsumerOptions,
  invoke: (run: () => Promise<SQSBatchResponse>) => Promise<SQSBatchResponse> = (run) => run(),
): Promise<{
  received: number;
  failed: number;
  crashed: boolean;
  messages: SqsMessage[];
  failedIds: ReadonlySet<string>;
}> {
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.url,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 0,
      MessageSystemAttributeNames: ['All'],
    }),
  );
  const messages = out.Messages ?? [];
  if (messages.length === 0)
    return { received: 0, failed: 0, crashed: false, messages, failedIds: new Set() };
  let response: SQSBatchResponse;
  try {
    response = await invoke(() =>
      consumeSqsBatch(sqsEventOf(messages, queue.arn), handler, options),
    );
  } catch {
    return {
      received: messages.length,
      failed: messages.length,
      crashed: true,
      messages,
      failedIds: new Set(messages.map((m) => m.MessageId ?? '')),
    };
  }
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const done = messages.filter((m) => !failed.has(m.MessageId ?? ''));
  for (let i = 0; i < done.length; i += 10) {
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: done
          .slice(i, i + 10)
          .map((m, j) => ({ Id: `d${j}`, ReceiptHandle: m.ReceiptHandle })),
      }),
    );
  }
  return {
    received: messages.length,
    failed: failed.size,
    crashed: false,
    messages,
    failedIds: failed,
  };
}

/**
 * Moves every message of `dlqUrl` back to `queueUrl` with its body and message group, as
 * a DLQ redrive (`StartMessageMoveTask`, the console's "Start DLQ redrive") does; fauxqs
 * has no move task. Returns the bodies moved.
 */
export async function redriveDlq(
  sqs: SQSClient,
  dlqUrl: string,
  queueUrl: string,
): Promise<string[]> {
  const moved: string[] = [];
  for (;;) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) return moved;
    for (const m of messages) {
      const a = m.Attributes ?? {};
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: m.Body ?? '',
          MessageGroupId: a.MessageGroupId ?? 'redrive',
          MessageDeduplicationId: `${(a.MessageDeduplicationId ?? m.MessageId ?? '').slice(0, 80)}-redrive-${Date.now().toString(36)}-${moved.length}`,
        }),
      );
      await sqs.send(
        new DeleteMessageCommand({ QueueUrl: dlqUrl, ReceiptHandle: m.ReceiptHandle }),
      );
      moved.push(m.Body ?? '');
    }
  }
}
