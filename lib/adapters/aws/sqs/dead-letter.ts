import {
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import { errorMessage } from '../../../kernel/errors.js';
import { awsCall } from '../call.js';

/** Message attributes a parked message carries: why, from where, after how many deliveries. */
export const PARKED_ATTRIBUTES = {
  errorClass: 'lambdacable.errorClass',
  errorMessage: 'lambdacable.errorMessage',
  sourceQueue: 'lambdacable.sourceQueue',
  receiveCount: 'lambdacable.receiveCount',
} as const;

/** SQS allows 10 message attributes; the parked ones take 4. */
const MAX_ORIGINAL_ATTRIBUTES = 6;
const MAX_ERROR_MESSAGE = 1_000;

/** A message to park: what SQS delivered, in the SDK's or Lambda's shape. */
export interface ParkedMessage {
  readonly messageId: string;
  readonly body: string;
  /** The FIFO message group; kept so a redrive puts the message back in its group. */
  readonly messageGroupId: string | undefined;
  readonly receiveCount: number;
  /** The original message attributes (Lambda's event shape), kept. */
  readonly messageAttributes?: SQSMessageAttributes;
  /** The queue it was received from (URL or ARN). */
  readonly sourceQueue: string;
}

/**
 * Sends `message` to the dead-letter queue `dlqUrl` (a FIFO queue) as it was, with its body,
 * group and attributes, and attributes saying why ({@link PARKED_ATTRIBUTES}): what a
 * consumer does with a message that can never be handled, instead of waiting out
 * `maxReceiveCount` deliveries. The deduplication id is the SQS message id: a second park of
 * one delivery (a crash before its delete) is dropped. A DLQ redrive moves it back and it is
 * handled as any message.
 */
export async function parkInDeadLetterQueue(
  sqs: SQSClient,
  dlqUrl: string,
  message: ParkedMessage,
  reason: unknown,
): Promise<void> {
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, a] of Object.entries(message.messageAttributes ?? {}).slice(
    0,
    MAX_ORIGINAL_ATTRIBUTES,
  )) {
    attributes[name] = {
      DataType: a.dataType,
      ...(a.stringValue !== undefined ? { StringValue: a.stringValue } : {}),
      ...(a.binaryValue !== undefined ? { BinaryValue: Buffer.from(a.binaryValue, 'base64') } : {}),
    };
  }
  const text = (value: string) => ({ DataType: 'String', StringValue: value || '-' });
  attributes[PARKED_ATTRIBUTES.errorClass] = text(
    reason instanceof Error ? reason.name : typeof reason,
  );
  attributes[PARKED_ATTRIBUTES.errorMessage] = text(
    errorMessage(reason).slice(0, MAX_ERROR_MESSAGE),
  );
  attributes[PARKED_ATTRIBUTES.sourceQueue] = text(message.sourceQueue);
  attributes[PARKED_ATTRIBUTES.receiveCount] = {
    DataType: 'Number',
    StringValue: String(message.receiveCount),
  };
  await awsCall('SendMessage', dlqUrl, [message.messageId], () =>
    sqs.send(
      new SendMessageCommand({
        QueueUrl: dlqUrl,
        MessageBody: message.body,
        MessageGroupId: message.messageGroupId ?? 'parked',
        MessageDeduplicationId: message.messageId,
        MessageAttributes: attributes,
      }),
    ),
  );
}

/**
 * Parks a Lambda SQS record in the DLQ that `deadLetter.queueUrl` names for its source queue
 * ({@link parkInDeadLetterQueue}) and logs it; false, logged, when parking failed (the caller
 * then retries the record as a transient failure).
 */
export async function parkSqsRecord(
  deadLetter: { readonly sqs: SQSClient; readonly queueUrl: (eventSourceArn: string) => string },
  record: SQSRecord,
  reason: unknown,
  logger: Pick<Console, 'error'>,
): Promise<boolean> {
  try {
    await parkInDeadLetterQueue(
      deadLetter.sqs,
      deadLetter.queueUrl(record.eventSourceARN),
      {
        messageId: record.messageId,
        body: record.body,
        messageGroupId: record.attributes.MessageGroupId,
        receiveCount: Number(record.attributes.ApproximateReceiveCount ?? '1'),
        messageAttributes: record.messageAttributes,
        sourceQueue: record.eventSourceARN,
      },
      reason,
    );
  } catch (error) {
    logger.error(
      `could not park ${record.messageId} in the DLQ, it is retried: ${errorMessage(error)}`,
    );
    return false;
  }
  logger.error(`parked ${record.messageId} in the DLQ (permanent): ${errorMessage(reason)}`);
  return true;
}
