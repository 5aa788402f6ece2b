import { randomUUID } from 'node:crypto';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBRecord } from 'aws-lambda';
import { streamFailureRecord } from '../../lib/aws';
import { LOCAL_REGION } from './services';

/** The account id of ARNs the local stack makes up (fauxqs' own). */
const LOCAL_ACCOUNT = '000000000000';

/**
 * A `StreamPoller` `onFailure` that does what Lambda's on-failure destination does:
 * sends the given-up batch's metadata (`DDBStreamBatchInfo`, as Lambda shapes it) to the
 * relay failures queue, where `npm run relay:replay` finds it.
 */
export function sendToRelayFailures(options: {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly streamArn: string;
  /** The relay's function name, for the record's `functionArn`. */
  readonly functionName: string;
}): (
  records: DynamoDBRecord[],
  reason: unknown,
  batch: { readonly shardId: string; readonly invokeCount: number },
) => Promise<void> {
  return async (records, _reason, batch) => {
    const record = streamFailureRecord({
      records,
      shardId: batch.shardId,
      streamArn: options.streamArn,
      functionArn: `arn:aws:lambda:${LOCAL_REGION}:${LOCAL_ACCOUNT}:function:${options.functionName}`,
      invokeCount: batch.invokeCount,
      requestId: randomUUID(),
      now: new Date(),
    });
    await options.sqs.send(
      new SendMessageCommand({ QueueUrl: options.queueUrl, MessageBody: JSON.stringify(record) }),
    );
  };
}
