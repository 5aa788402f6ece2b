import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import {
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
  type Message as SqsMessage,
} from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';
import { inject } from 'vitest';
import { StreamPoller, type StreamPollerOptions } from '../../infra/local/pollers/stream';
import { OutboxRelay, type OutboxRelayOptions } from '../../lib/aws';

/**
 * A poller that relays the outbox stream with `relay`, driven by hand with `drain()`.
 * A failed batch is retried by the next poll (no retry delay) and logged nowhere.
 */
export function outboxPoller(
  streamArn: string,
  relay: { relay(records: DynamoDBRecord[]): Promise<DynamoDBBatchResponse> },
  options: Partial<Omit<StreamPollerOptions, 'streams' | 'streamArn' | 'handler'>> = {},
): {
  drain(): Promise<void>;
  poller: StreamPoller;
} {
  const streams = new DynamoDBStreamsClient({
    endpoint: inject('dynamodbEndpoint'),
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const poller = new StreamPoller({
    streams,
    streamArn,
    handler: (records) => relay.relay(records),
    retryDelayMs: 0,
    logger: { error: () => {}, info: () => {} },
    ...options,
  });
  return {
    poller,
    async drain() {
      // Until a poll finds nothing new: what the stream holds has been handed over.
      for (let i = 0; i < 50; i++) if ((await poller.pollOnce()) === 0) return;
      throw new Error('stream did not drain');
    },
  };
}

/**
 * `relay` on stream records whose sequence numbers `renumber` replaced (DynamoDB Local issues
 * 21 digits, AWS up to 40): the same number always gets the same replacement, so a retried
 * record keeps its offset, and the batch item failures name the stream's own numbers again.
 * `renumber` gets the number and how many distinct numbers came before it.
 */
export function renumbered(
  relay: { relay(records: DynamoDBRecord[]): Promise<DynamoDBBatchResponse> },
  renumber: (sequenceNumber: string, index: number) => string,
): { relay(records: DynamoDBRecord[]): Promise<DynamoDBBatchResponse> } {
  const given = new Map<string, string>();
  const original = new Map<string, string>();
  const numberOf = (seq: string): string => {
    let next = given.get(seq);
    if (next === undefined) {
      next = renumber(seq, given.size);
      given.set(seq, next);
      original.set(next, seq);
    }
    return next;
  };
  return {
    async relay(records) {
      const out = await relay.relay(
        records.map((r) =>
          r.dynamodb?.SequenceNumber === undefined
            ? r
            : {
                ...r,
                dynamodb: { ...r.dynamodb, SequenceNumber: numberOf(r.dynamodb.SequenceNumber) },
              },
        ),
      );
      return {
        batchItemFailures: out.batchItemFailures.map((f) => ({
          itemIdentifier: original.get(f.itemIdentifier) ?? f.itemIdentifier,
        })),
      };
    },
  };
}

/**
 * A relay on the test's queues. It does not try a failed send again within a call (no
 * `retryDelaysMs`): the poller's retries stand in for Lambda's, at once.
 */
export function relayFor(
  sqs: SQSClient,
  routes: OutboxRelayOptions['routes'],
  extra: Partial<OutboxRelayOptions> = {},
): OutboxRelay {
  return new OutboxRelay({ sqs, routes, onRefused: () => {}, retryDelaysMs: [], ...extra });
}

/** Receives until the queue stays empty, deleting what it got (with all its attributes). */
export async function receiveAll(
  sqs: SQSClient,
  queueUrl: string,
  max = 1000,
): Promise<SqsMessage[]> {
  const out: SqsMessage[] = [];
  while (out.length < max) {
    const r = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const got = r.Messages ?? [];
    if (got.length === 0) break;
    for (const m of got) {
      out.push(m);
      await sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }),
      );
    }
  }
  return out;
}

/** Receives up to 10 messages without deleting them. */
export async function receive(
  sqs: SQSClient,
  queueUrl: string,
  waitSeconds = 0,
): Promise<SqsMessage[]> {
  const r = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: waitSeconds,
      MessageSystemAttributeNames: ['All'],
    }),
  );
  return r.Messages ?? [];
}

/**
 * Sends a message that is no envelope to a consumer queue, in group `D`, as a producer that
 * bypassed the relay would: the consumer must park it as poison.
 */
export async function sendNotAnEnvelope(sqs: SQSClient, queueUrl: string): Promise<void> {
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: 'this is not an envelope',
      MessageGroupId: 'D',
      MessageDeduplicationId: `d-${Date.now()}`,
    }),
  );
}
