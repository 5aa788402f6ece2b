import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import {
  ReceiveMessageCommand,
  SetQueueAttributesCommand,
  SQSClient,
  type Message as SqsMessage,
} from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';
import { describe, expect, inject, it } from 'vitest';
import { recordFromItem } from '../../lib/adapters/aws/dynamodb/outbox';
import {
  type ConsumedMessage,
  DynamoAckStore,
  OutboxProducer,
  OutboxRelay,
  PARKED_ATTRIBUTES,
  parseParkedRecord,
  type RelayResult,
  replayRelayFailures,
  SqsRelayParking,
} from '../../lib/aws';
import {
  AvroCodec,
  ackPartition,
  decodeEnvelope,
  type LambdacableError,
  UnknownEventTypeError,
} from '../../lib/core';
import { MemorySchemaRegistry } from '../../lib/testing';
import { testResources } from '../helpers/aws';
import { fastRetry, injectThrottling } from '../helpers/faults';
import { outboxPoller, receiveAll, sendNotAnEnvelope } from '../helpers/relay';
import { invokeOnSqs, redriveDlq } from '../helpers/sqs-lambda';

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const bytes = (s: string) => new TextEncoder().encode(s);
const quiet = { error: () => {}, warn: () => {} };
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Receives up to 10 messages with their system and message attributes, deleting nothing. */
async function peek(sqs: SQSClient, queueUrl: string): Promise<SqsMessage[]> {
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 0,
      VisibilityTimeout: 0,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  return out.Messages ?? [];
}

/** An SQS client whose first `calls()` SendMessageBatch calls are throttled on every SDK attempt. */
function throttledSqs(throttle: { left: number }): SQSClient {
  const sqs = new SQSClient({
    endpoint: inject('sqsEndpoint'),
    region: 'us-east-1',
    credentials,
    retryStrategy: fastRetry(2, 1),
  });
  injectThrottling(sqs, (command) => {
    if (command !== 'SendMessageBatchCommand' || throttle.left <= 0) return 'none';
    throttle.left--;
    return 'always';
  });
  return sqs;
}

/** A poller over `relay` that keeps every invocation's records and result. */
function recordingPoller(streamArn: string, relay: OutboxRelay) {
  const calls: { records: DynamoDBRecord[]; result: RelayResult }[] = [];
  const { drain } = outboxPoller(streamArn, {
    relay: async (records: DynamoDBRecord[]): Promise<DynamoDBBatchResponse> => {
      const result = await relay.relay(records);
      calls.push({ records, result });
      return result;
    },
  });
  return { calls, drain };
}

describe('the relay: poison versus transient (DynamoDB Local + fauxqs)', () => {
  it('parks an entry SQS refuses with SenderFault at once, with its outbox item, delivers the rest of the batch, and relay:replay sends it later', async () => {
    const env = await testResources('poison-relay', [
      { name: 'small', topics: ['jobs'], visibilityTimeout: 2 },
    ]);
    const queue = env.queues.small!;
    // A queue that takes at most 1 KiB: SQS refuses a larger entry with SenderFault.
    await env.sqs.send(
      new SetQueueAttributesCommand({
        QueueUrl: queue.url,
        Attributes: { MaximumMessageSize: '1024' },
      }),
    );
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    const big = 'x'.repeat(1500);
    for (const [key, value] of [
      ['k', 'a'],
      ['k', big],
      ['k', 'c'],
      ['j', 'd'],
    ] as const) {
      await producer.publish({ key, value: bytes(value) });
    }
    const refused: LambdacableError[] = [];
    const relay = new OutboxRelay({
      sqs: env.sqs,
      routes: { jobs: [queue.url] },
      onRefused: (error) => refused.push(error),
      parking: new SqsRelayParking({ sqs: env.sqs, queueUrl: env.relayFailuresUrl! }),
      retryDelaysMs: [1, 1],
    });
    const { calls, drain } = recordingPoller(env.outboxStreamArn!, relay);
    await drain();

    // One invocation, not failed: no retry holds the shard.
    expect(calls).toHaveLength(1);
    expect(calls[0]!.records).toHaveLength(4);
    const bigSeq = calls[0]!.records[1]!.dynamodb!.SequenceNumber!;
    expect(calls[0]!.result).toEqual({
      batchItemFailures: [],
      sent: 3,
      refused: 1,
      refusedSequenceNumbers: [bigSeq],
      parked: 1,
    });
    expect(refused.map((e) => e.message)).toEqual([
      expect.stringMatching(/^SQS refused .* InvalidParameterValue .*1024 bytes/),
    ]);

    // The rest of the batch, the refused record's key included, is delivered in order.
    const delivered = (await receiveAll(env.sqs, queue.url)).map((m) => decodeEnvelope(m.Body!));
    const values = (key: string) =>
      delivered.filter((e) => e.key === key).map((e) => text(e.payload));
    expect(values('k')).toEqual(['a', 'c']);
    expect(values('j')).toEqual(['d']);

    // Parked with the full outbox item, the queue that refused it and why.
    const parkedMessages = await peek(env.sqs, env.relayFailuresUrl!);
    expect(parkedMessages).toHaveLength(1);
    const parked = parseParkedRecord(parkedMessages[0]!.Body!);
    expect(parked).toMatchObject({
      sequenceNumber: bigSeq,
      queueUrl: queue.url,
      error: { code: 'InvalidParameterValue' },
    });
    expect(recordFromItem(parked.item!)).toEqual(
      recordFromItem(calls[0]!.records[1]!.dynamodb!.NewImage as never),
    );
    expect(parked.keys.pk).toBe('jobs#k');

    // Fixed (the queue takes it now): the replay sends it, flagged, with its offset.
    await env.sqs.send(
      new SetQueueAttributesCommand({
        QueueUrl: queue.url,
        Attributes: { MaximumMessageSize: '262144' },
      }),
    );
    const reports = await replayRelayFailures({
      streams: new DynamoDBStreamsClient({
        endpoint: inject('dynamodbEndpoint'),
        region: 'us-east-1',
        credentials,
      }),
      dynamodb: env.dynamodb,
      outboxTable: env.tables.outbox,
      relay: new OutboxRelay({ sqs: env.sqs, routes: { jobs: [queue.url] }, onRefused: () => {} }),
      sqs: env.sqs,
      queueUrl: env.relayFailuresUrl!,
      waitSeconds: 0,
    });
    expect(reports.map((r) => [r.outcome, r.parked?.sequenceNumber, r.replayed.length])).toEqual([
      ['replayed', bigSeq, 1],
    ]);
    const replayed = (await receiveAll(env.sqs, queue.url)).map((m) => decodeEnvelope(m.Body!));
    expect(replayed.map((e) => [e.key, text(e.payload), e.offset, e.replayed])).toEqual([
      ['k', big, BigInt(bigSeq), true],
    ]);
    expect(await peek(env.sqs, env.relayFailuresUrl!)).toEqual([]);
  });

  it('retries a throttled send with back-off in the invocation, then from the failed record; parks nothing', async () => {
    const env = await testResources('transient-relay', [
      { name: 'work', topics: ['jobs'], visibilityTimeout: 2 },
    ]);
    const queue = env.queues.work!;
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    for (let i = 0; i < 6; i++) await producer.publish({ key: `k${i % 2}`, value: bytes(`v${i}`) });
    const throttle = { left: 2 };
    const relay = new OutboxRelay({
      sqs: throttledSqs(throttle),
      routes: { jobs: [queue.url] },
      onRefused: () => {},
      parking: new SqsRelayParking({ sqs: env.sqs, queueUrl: env.relayFailuresUrl! }),
      retryDelaysMs: [5, 5, 5],
    });
    const first = recordingPoller(env.outboxStreamArn!, relay);
    await first.drain();
    // Two throttled sends, the third went through: one invocation, nothing failed.
    expect(throttle.left).toBe(0);
    expect(first.calls).toHaveLength(1);
    expect(first.calls[0]!.result).toMatchObject({
      batchItemFailures: [],
      sent: 6,
      refused: 0,
      parked: 0,
    });

    // A throttling episode longer than the invocation's tries (a new poller reads the shard
    // from its start): a batch item failure from the first record (Lambda retries it), never
    // parked.
    for (let i = 6; i < 9; i++) await producer.publish({ key: 'k0', value: bytes(`v${i}`) });
    throttle.left = 3;
    const shortRelay = new OutboxRelay({
      sqs: throttledSqs(throttle),
      routes: { jobs: [queue.url] },
      onRefused: () => {},
      parking: new SqsRelayParking({ sqs: env.sqs, queueUrl: env.relayFailuresUrl! }),
      retryDelaysMs: [5],
    });
    const second = recordingPoller(env.outboxStreamArn!, shortRelay);
    await second.drain();
    const withRecords = second.calls.filter((c) => c.records.length > 0);
    expect(withRecords[0]!.result.batchItemFailures).toEqual([
      { itemIdentifier: withRecords[0]!.records[0]!.dynamodb!.SequenceNumber },
    ]);
    expect(withRecords[0]!.result.parked).toBe(0);
    expect(withRecords.at(-1)!.result.batchItemFailures).toEqual([]);

    const got = (await receiveAll(env.sqs, queue.url)).map((m) => decodeEnvelope(m.Body!));
    expect(got.filter((e) => e.key === 'k0').map((e) => text(e.payload))).toEqual([
      'v0',
      'v2',
      'v4',
      'v6',
      'v7',
      'v8',
    ]);
    expect(got.filter((e) => e.key === 'k1').map((e) => text(e.payload))).toEqual([
      'v1',
      'v3',
      'v5',
    ]);
    expect(await peek(env.sqs, env.relayFailuresUrl!)).toEqual([]);
  });
});

describe('a consumer: poison versus transient (DynamoDB Local + fauxqs)', () => {
  it('parks bad JSON, an unknown type and undecodable payloads in the DLQ after one receive, goes on with their groups, retries throttling with back-off, and handles a redriven message', async () => {
    const env = await testResources('poison-consumer', [
      { name: 'work', topics: ['jobs'], visibilityTimeout: 2 },
    ]);
    const queue = env.queues.work!;
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    const { drain } = outboxPoller(
      env.outboxStreamArn!,
      new OutboxRelay({ sqs: env.sqs, routes: { jobs: [queue.url] }, onRefused: () => {} }),
    );
    for (const [key, value] of [
      ['A', '{"ok":1}'],
      ['A', '{bad json'],
      ['A', 'after-bad'],
      ['B', 'avro'],
      ['C', 'unknown'],
      ['T', 'throttled'],
    ] as const) {
      await producer.publish({ key, value: bytes(value) });
    }
    await drain();
    await sendNotAnEnvelope(env.sqs, queue.url);

    // DynamoDB throttles the handler's reads until `throttling` is lifted.
    let throttling = true;
    const db = new DynamoDBClient({
      endpoint: inject('dynamodbEndpoint'),
      region: 'us-east-1',
      credentials,
      retryStrategy: fastRetry(2, 1),
    });
    injectThrottling(db, (command) =>
      command === 'GetItemCommand' && throttling ? 'always' : 'none',
    );
    const codec = new AvroCodec(new MemorySchemaRegistry());
    let fixed = false;
    const handled: { value: string; receiveCount: number }[] = [];
    const handler = async (m: ConsumedMessage) => {
      const value = text(m.value);
      handled.push({ value, receiveCount: m.receiveCount });
      if (fixed) return;
      if (value === 'unknown') throw new UnknownEventTypeError('Mystery');
      if (value === 'avro') await codec.decode(m.value);
      if (value.startsWith('{')) JSON.parse(value);
      if (value === 'throttled') {
        await db.send(
          new GetItemCommand({ TableName: env.tables.acks, Key: { pk: { S: 'nothing' } } }),
        );
      }
    };
    const acks = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
    const options = {
      group: 'work',
      ackStore: acks,
      logger: quiet,
      visibility: { sqs: env.sqs, queueUrl: () => queue.url },
      deadLetter: { sqs: env.sqs, queueUrl: () => queue.dlqUrl },
    };
    const bodies = new Map<string, string>();
    const failed: string[] = [];
    const invokeUntilEmpty = async () => {
      for (let i = 0; i < 20; i++) {
        const run = await invokeOnSqs(env.sqs, queue, handler, options);
        if (run.received === 0) return;
        for (const m of run.messages) bodies.set(m.Body!, m.Attributes!.MessageGroupId!);
        failed.push(
          ...run.messages.filter((m) => run.failedIds.has(m.MessageId!)).map((m) => m.Body!),
        );
      }
    };
    await invokeUntilEmpty();

    // Only the throttled message failed; its group waits, the others went on.
    expect(failed.map((b) => text(decodeEnvelope(b).payload))).toEqual(['throttled']);
    expect(handled.map((h) => h.value)).toEqual(
      expect.arrayContaining([
        '{"ok":1}',
        '{bad json',
        'after-bad',
        'avro',
        'unknown',
        'throttled',
      ]),
    );
    expect(handled.filter((h) => h.value !== 'throttled').every((h) => h.receiveCount === 1)).toBe(
      true,
    );

    // Parked after one receive: the original body and group, and why.
    const dead = await peek(env.sqs, queue.dlqUrl);
    const reasons = new Map(
      dead.map((m) => {
        const a = m.MessageAttributes ?? {};
        expect(m.Attributes!.MessageGroupId).toBe(bodies.get(m.Body!));
        expect(a[PARKED_ATTRIBUTES.receiveCount]?.StringValue).toBe('1');
        expect(a[PARKED_ATTRIBUTES.sourceQueue]?.StringValue).toBe(queue.arn);
        expect(a[PARKED_ATTRIBUTES.errorMessage]?.StringValue).toBeTruthy();
        return [m.Attributes!.MessageGroupId!, a[PARKED_ATTRIBUTES.errorClass]?.StringValue];
      }),
    );
    expect(Object.fromEntries(reasons)).toEqual({
      A: 'SyntaxError',
      B: 'DecodeError',
      C: 'UnknownEventTypeError',
      D: 'MessageFormatError',
    });
    expect(dead).toHaveLength(4);

    // The parked offset is an open hole; the ack level went past it.
    const partition = ackPartition('jobs', 'A');
    const badOffset = decodeEnvelope(
      [...bodies.keys()].find((b) => b.includes(Buffer.from('{bad json').toString('base64')))!,
    ).offset;
    const state = await acks.loadState('work', partition);
    expect([...state!.holes.keys()]).toEqual([badOffset]);
    expect(state!.ackLevel > badOffset).toBe(true);

    // The throttled message is held back by its back-off (2 s), not parked; once DynamoDB
    // answers again it is handled on its second receive.
    expect((await invokeOnSqs(env.sqs, queue, handler, options)).received).toBe(0);
    throttling = false;
    await sleep(2_200);
    await invokeUntilEmpty();
    expect(handled.filter((h) => h.value === 'throttled').map((h) => h.receiveCount)).toEqual([
      1, 2,
    ]);
    expect(
      (await peek(env.sqs, queue.dlqUrl)).map((m) => m.Attributes!.MessageGroupId).sort(),
    ).toEqual(['A', 'B', 'C', 'D']);

    // A redrive, once the consumer is fixed: each parked message is handled normally and its
    // hole closes; the body that is no envelope at all is parked again.
    fixed = true;
    const before = handled.length;
    expect(await redriveDlq(env.sqs, queue.dlqUrl, queue.url)).toHaveLength(4);
    await invokeUntilEmpty();
    expect(
      handled
        .slice(before)
        .map((h) => h.value)
        .sort(),
    ).toEqual(['avro', 'unknown', '{bad json'].sort());
    expect((await acks.loadState('work', partition))!.holes.size).toBe(0);
    const again = await peek(env.sqs, queue.dlqUrl);
    expect(again.map((m) => m.Body)).toEqual(['this is not an envelope']);
  });
});
