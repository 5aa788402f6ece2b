/**
 * Issue 21: every producer path refuses, before commit, an event that could not reach its
 * consumers (an SQS body over 256 KiB after encoding, a broadcast over the frame limit),
 * and the relay never skips a committed record it cannot send: it is a batch item failure,
 * retried, then handed to relay-failures. On DynamoDB Local + fauxqs, through the real
 * handlers of `functions/` where one is named.
 */
import {
  PutItemCommand,
  QueryCommand,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  DynamoDBRecord,
} from 'aws-lambda';
import { beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { consumerGroupsFor } from '../../infra/deploy/consumers';
import { queueUrlVariable, type TableName, tableVariable } from '../../infra/deploy/names';
import { sendToRelayFailures } from '../../infra/local/relay-failures';
import {
  DynamoOutbox,
  DynamoSchemaRegistry,
  OutboxProducer,
  replayRelayFailures,
} from '../../lib/aws';
import {
  AvroCodec,
  BROADCAST_TOPIC,
  BroadcastEvent,
  createEventSender,
  type EventSender,
  EventTopics,
  type EventType,
  LimitExceededError,
  MAX_BROADCAST_DATA_BYTES,
  MAX_SQS_BODY_BYTES,
  RemoteCommandEvent,
} from '../../lib/core';
import { testResources } from '../helpers/aws';
import { OrderPlaced } from '../helpers/events';
import { outboxPoller, receiveAll, relayFor } from '../helpers/relay';

/** The consumer groups of this environment (read once, as a deployment's start reads them). */
const consumerGroups = consumerGroupsFor(process.env);

type Env = Awaited<ReturnType<typeof testResources>>;

/** An order whose id makes the SQS body (Avro in base64) over 256 KiB, the item under 400 KB. */
/** The broadcast key the http-broadcast handler runs with (32 bytes or more, as configFromEnv requires). */
const BROADCAST_KEY = 'producer-refusals-broadcast-key-0123456789';

const oversize = () => OrderPlaced.of({ orderId: `big-${'x'.repeat(200_000)}`, amount: 1 });
/** Raw data that is 95 KiB as given and grows over 96 KiB when framed (its quotes escaped). */
const growingData = 'a"'.repeat((95 * 1024) / 2);

let env: Env;
let sender: EventSender<TransactWriteItem[]>;
let codec: AvroCodec;

async function outboxItems(pk: string): Promise<number> {
  const out = await env.dynamodb.send(
    new QueryCommand({
      TableName: env.tables.outbox,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: pk } },
      ConsistentRead: true,
    }),
  );
  return out.Count ?? 0;
}

beforeAll(async () => {
  env = await testResources('refusals', consumerGroups);
  const registry = new DynamoSchemaRegistry({
    client: env.dynamodb,
    tableName: env.tables.schemas,
  });
  codec = new AvroCodec(registry);
  sender = await createEventSender<TransactWriteItem[]>({
    topics: new EventTopics().register(OrderPlaced).register(BroadcastEvent),
    registry,
    outbox: new DynamoOutbox({ tableName: env.tables.outbox }),
  }).initialize();
  // The composition root of functions/ reads these (as serverless.yml sets them).
  vi.stubEnv('AWS_REGION', 'us-east-1');
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'local');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
  vi.stubEnv('LAMBDACABLE_DYNAMODB_ENDPOINT', inject('dynamodbEndpoint'));
  vi.stubEnv('LAMBDACABLE_SQS_ENDPOINT', inject('sqsEndpoint'));
  vi.stubEnv('LAMBDACABLE_BROADCAST_KEY', BROADCAST_KEY);
  vi.stubEnv('POWERTOOLS_DEV', 'true');
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  for (const [table, name] of Object.entries(env.tables)) {
    vi.stubEnv(tableVariable(table as TableName), name);
  }
  for (const group of consumerGroups) {
    vi.stubEnv(queueUrlVariable(group.name), env.queues[group.name]!.url);
  }
});

describe('sendInTx refuses before commit', () => {
  it('an event whose SQS body would be over 256 KiB: LimitExceededError, nothing in the tx', async () => {
    const tx: TransactWriteItem[] = [];
    const error = await sender.sendInTx(tx, oversize()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LimitExceededError);
    expect((error as LimitExceededError).message).toMatch(
      new RegExp(
        `^SQS body of shop.OrderPlaced \\w+ is \\d+ bytes, the limit is ${MAX_SQS_BODY_BYTES} `,
      ),
    );
    expect((error as LimitExceededError).bytes).toBeGreaterThan(MAX_SQS_BODY_BYTES);
    expect(tx).toEqual([]);
  });

  it('a broadcast whose frame would be over the limit, though its SQS body fits', async () => {
    const tx: TransactWriteItem[] = [];
    const error = await sender
      .sendInTx(tx, BroadcastEvent.of({ stream: 'refused/1', data: growingData }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LimitExceededError);
    expect((error as LimitExceededError).message).toMatch(
      new RegExp(`^broadcast: "data" is \\d+ bytes, the limit is ${MAX_BROADCAST_DATA_BYTES}$`),
    );
    expect(tx).toEqual([]);
    // The caller's transaction without the event commits nothing of it.
    expect(await outboxItems(`${BROADCAST_TOPIC}#refused/1`)).toBe(0);
  });

  it('a broadcast at the limit is accepted and committed', async () => {
    const tx: TransactWriteItem[] = [];
    const data = JSON.stringify('y'.repeat(MAX_BROADCAST_DATA_BYTES - 2));
    await sender.sendInTx(tx, BroadcastEvent.of({ stream: 'accepted/1', data }));
    await env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
    expect(await outboxItems(`${BROADCAST_TOPIC}#accepted/1`)).toBe(1);
  });
});

describe('sendAsync and Producer.publish refuse before the write', () => {
  it('sendAsync: onError gets the LimitExceededError, it counts as failed, nothing is written', async () => {
    const errors: unknown[] = [];
    const async = await createEventSender({
      topics: new EventTopics().register(OrderPlaced),
      registry: new DynamoSchemaRegistry({ client: env.dynamodb, tableName: env.tables.schemas }),
      producer: new OutboxProducer({
        client: env.dynamodb,
        tableName: env.tables.outbox,
        topic: 'orders',
      }),
      onError: (e) => errors.push(e),
    }).initialize();
    const event = oversize();
    async.sendAsync(event);
    expect(await async.close()).toMatchObject({ failed: 1, sent: 0, complete: false });
    expect(errors[0]).toBeInstanceOf(LimitExceededError);
    expect(await outboxItems(`orders#${event.value.orderId}`)).toBe(0);
  });

  it('OutboxProducer.publish: an oversize message and, with eventTypes, a broadcast over the frame limit', async () => {
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: BROADCAST_TOPIC,
      eventTypes: [BroadcastEvent, RemoteCommandEvent] as EventType<unknown>[],
    });
    await expect(
      producer.publish({ key: 'raw/1', value: new Uint8Array(200_000) }),
    ).rejects.toThrow(new RegExp(`the limit is ${MAX_SQS_BODY_BYTES}`));
    const value = await codec.encode(BroadcastEvent, { stream: 'raw/2', data: growingData });
    await expect(
      producer.publish({ key: 'raw/2', type: BroadcastEvent.name, value }),
    ).rejects.toThrow(LimitExceededError);
    await producer.close();
    expect(await outboxItems(`${BROADCAST_TOPIC}#raw/1`)).toBe(0);
    expect(await outboxItems(`${BROADCAST_TOPIC}#raw/2`)).toBe(0);
  });
});

describe('POST /_broadcast (functions/http-broadcast)', () => {
  const request = (body: string): APIGatewayProxyEventV2 =>
    ({
      headers: { authorization: `Bearer ${BROADCAST_KEY}` },
      body,
      isBase64Encoded: false,
    }) as unknown as APIGatewayProxyEventV2;

  it('answers 413 with a JSON error naming the limit and the size, and writes nothing', async () => {
    const { handler } = await import('../../functions/http-broadcast');
    const answer = (await handler(
      request(JSON.stringify({ stream: 'http/1', data: growingData })),
    )) as APIGatewayProxyStructuredResultV2;
    expect(answer.statusCode).toBe(413);
    expect(answer.headers).toMatchObject({ 'content-type': 'application/json' });
    const body = JSON.parse(answer.body!);
    expect(body).toEqual({
      error: expect.stringMatching(/^item: "data" is \d+ bytes, the limit is 98304$/),
      what: 'data',
      bytes: expect.any(Number),
      limit: MAX_BROADCAST_DATA_BYTES,
    });
    expect(body.bytes).toBeGreaterThan(MAX_BROADCAST_DATA_BYTES);
    expect(await outboxItems(`${BROADCAST_TOPIC}#http/1`)).toBe(0);
  });
});

describe('the relay never skips a committed record it cannot send (functions/outbox-relay)', () => {
  it("returns a foreign writer's oversize item as a batch item failure, counts relayRefusedRecords, then hands it to relay-failures", async () => {
    const { handler } = await import('../../functions/outbox-relay');
    // A foreign writer, with the documented layout, and no check: 200,000 bytes of payload fit
    // DynamoDB's 400 KB item, not SQS's 256 KiB once in base64.
    const id = '0190f3a4b5c6d7e8f9a0b1c2d3e4';
    await env.dynamodb.send(
      new PutItemCommand({
        TableName: env.tables.outbox,
        Item: {
          pk: { S: `${BROADCAST_TOPIC}#foreign/1` },
          sk: { S: id },
          topic: { S: BROADCAST_TOPIC },
          key: { S: 'foreign/1' },
          type: { S: BroadcastEvent.name },
          payload: { B: new Uint8Array(200_000) },
          createdAt: { N: String(Date.now()) },
          expiresAt: { N: String(Math.floor(Date.now() / 1000) + 3600) },
        },
      }),
    );
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const errorLog = vi.spyOn(console, 'error').mockImplementation(() => {});
    const responses: { batchItemFailures: { itemIdentifier: string }[] }[] = [];
    const failures: string[] = [];
    let logged: string[] = [];
    let errors: string[] = [];
    try {
      const { drain } = outboxPoller(
        env.outboxStreamArn!,
        {
          relay: async (records: DynamoDBRecord[]) => {
            const response = await handler({ Records: records });
            responses.push(response);
            return response;
          },
        },
        {
          maxRetryAttempts: 2,
          onFailure: async (records, reason, batch) => {
            failures.push(...records.map((r) => r.dynamodb?.SequenceNumber ?? ''));
            await sendToRelayFailures({
              sqs: env.sqs,
              queueUrl: env.relayFailuresUrl!,
              streamArn: env.outboxStreamArn!,
              functionName: 'test-outboxRelay',
            })(records, reason, batch);
          },
        },
      );
      await drain();
    } finally {
      logged = log.mock.calls.map((c) => String(c[0]));
      errors = errorLog.mock.calls.map((c) => String(c[0]));
      log.mockRestore();
      errorLog.mockRestore();
    }
    // The first attempt and two retries each returned it; then the batch was given up on.
    const refusedAt = responses.map((r) => r.batchItemFailures[0]?.itemIdentifier);
    expect(refusedAt.filter(Boolean)).toHaveLength(3);
    expect(new Set(refusedAt.filter(Boolean)).size).toBe(1);
    expect(failures).toContain(refusedAt.find(Boolean));
    const metrics = logged
      .filter((line) => line.includes('relayRefusedRecords'))
      .map((line) => JSON.parse(line) as { relayRefusedRecords: number });
    expect(metrics.some((m) => m.relayRefusedRecords === 1)).toBe(true);
    // The error log names the sequence number.
    const errorLines = errors.join('\n');
    expect(errorLines).toMatch(/outbox record.* refused/);
    expect(errorLines).toContain(refusedAt.find(Boolean));
    // npm run relay:replay cannot send it either: the replay is incomplete, the record kept.
    const reports = await replayRelayFailures({
      streams: new DynamoDBStreamsClient({
        endpoint: inject('dynamodbEndpoint'),
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      }),
      dynamodb: env.dynamodb,
      outboxTable: env.tables.outbox,
      relay: relayFor(env.sqs, { [BROADCAST_TOPIC]: [env.queues.broadcast!.url] }),
      sqs: env.sqs,
      queueUrl: env.relayFailuresUrl!,
    });
    expect(reports.map((r) => r.outcome)).toEqual(['incomplete']);
    expect(reports[0]!.detail).toMatch(/the relay refused 1 record\(s\) it cannot send/);
    expect(reports[0]!.replayed.map((e) => e.id)).not.toContain(id);
    const failureRecords = await receiveAll(env.sqs, env.relayFailuresUrl!);
    expect(failureRecords).toHaveLength(1);
    // Nothing was sent for it (the broadcast accepted above was).
    const sent = await receiveAll(env.sqs, env.queues.broadcast!.url);
    expect(sent.map((m) => m.Attributes?.MessageGroupId)).not.toContain('foreign/1');
  });
});
