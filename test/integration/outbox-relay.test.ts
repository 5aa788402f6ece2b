import {
  CreateTableCommand,
  DeleteItemCommand,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBRecord } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoOutbox, DynamoSchemaRegistry, OutboxProducer } from '../../lib/aws';
import {
  AvroCodec,
  createEventSender,
  decodeEnvelope,
  EncodeError,
  type EventSender,
  EventTopics,
  LimitExceededError,
  MAX_SQS_BODY_BYTES,
  MessageFormatError,
  UnknownEventTypeError,
  withKey,
} from '../../lib/core';
import { testResources } from '../helpers/aws';
import { OrderPlaced, orderPlaced, UserSignedUp } from '../helpers/events';
import { outboxPoller, receiveAll, relayFor } from '../helpers/relay';

const groups = [
  { name: 'billing', topics: ['orders'], visibilityTimeout: 2, maxReceiveCount: 2 },
  { name: 'audit', topics: ['orders', 'users'] },
];

type Env = Awaited<ReturnType<typeof testResources>> & {
  sender: EventSender<TransactWriteItem[]>;
  business: string;
  codec: AvroCodec;
};

async function setup(label: string): Promise<Env> {
  const res = await testResources(label, groups);
  const business = `${res.prefix}-orders`;
  await res.dynamodb.send(
    new CreateTableCommand({
      TableName: business,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    }),
  );
  const registry = new DynamoSchemaRegistry({
    client: res.dynamodb,
    tableName: res.tables.schemas,
  });
  const sender = await createEventSender<TransactWriteItem[]>({
    topics: new EventTopics().register(OrderPlaced),
    registry,
    outbox: new DynamoOutbox({ tableName: res.tables.outbox }),
  }).initialize();
  return { ...res, sender, business, codec: new AvroCodec(registry) };
}

function routes(env: Env) {
  return {
    orders: [env.queues.billing!.url, env.queues.audit!.url],
    users: [env.queues.audit!.url],
  };
}

/** Commits an order item and its event in one transaction. */
async function placeOrder(env: Env, orderId: string, amount: number, failCondition = false) {
  const tx: TransactWriteItem[] = [
    {
      Put: {
        TableName: env.business,
        Item: { pk: { S: orderId }, amount: { N: String(amount) } },
        ConditionExpression: failCondition ? 'attribute_exists(pk)' : 'attribute_not_exists(pk)',
      },
    },
  ];
  await env.sender.sendInTx(tx, orderPlaced(orderId, amount));
  await env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
}

describe('sendInTx and the outbox relay (DynamoDB Local + fauxqs)', () => {
  let env: Env;
  beforeAll(async () => {
    env = await setup('relay');
  });

  it('delivers a committed event to every subscribed queue, keyed and deduplicated', async () => {
    await placeOrder(env, 'o-1', 10);
    const { drain } = outboxPoller(env.outboxStreamArn!, relayFor(env.sqs, routes(env)));
    await drain();
    for (const url of [env.queues.billing!.url, env.queues.audit!.url]) {
      const [m, ...rest] = await receiveAll(env.sqs, url);
      expect(rest).toEqual([]);
      expect(m!.Attributes?.MessageGroupId).toBe('o-1');
      const envelope = decodeEnvelope(m!.Body!);
      expect(m!.Attributes?.MessageDeduplicationId).toBe(envelope.id);
      expect(envelope).toMatchObject({ topic: 'orders', key: 'o-1', type: 'shop.OrderPlaced' });
      expect(envelope.offset).toBeGreaterThan(0n);
      expect(await env.codec.decode(envelope.payload, OrderPlaced)).toEqual({
        orderId: 'o-1',
        amount: 10,
      });
    }
  });

  it('never delivers the event of a cancelled transaction', async () => {
    const error = await placeOrder(env, 'o-never', 1, true).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransactionCanceledException);
    const { drain } = outboxPoller(env.outboxStreamArn!, relayFor(env.sqs, routes(env)));
    await drain();
    expect(await receiveAll(env.sqs, env.queues.billing!.url)).toEqual([]);
    expect(await receiveAll(env.sqs, env.queues.audit!.url)).toEqual([]);
  });

  it('sendAsync goes through the outbox producer; close() flushes every buffered event', async () => {
    const async = await createEventSender({
      topics: new EventTopics().register(OrderPlaced),
      registry: new DynamoSchemaRegistry({ client: env.dynamodb, tableName: env.tables.schemas }),
      producer: new OutboxProducer({
        client: env.dynamodb,
        tableName: env.tables.outbox,
        topic: 'orders',
      }),
    }).initialize();
    for (let i = 0; i < 30; i++) async.sendAsync(orderPlaced(`async-${i % 3}`, i));
    await async.close();
    expect(async.stats()).toMatchObject({ sent: 30, dropped: 0, failed: 0, buffered: 0 });
    const { drain } = outboxPoller(env.outboxStreamArn!, relayFor(env.sqs, routes(env)));
    await drain();
    const got = await receiveAll(env.sqs, env.queues.billing!.url);
    const amounts = await Promise.all(
      got.map(
        async (m) => (await env.codec.decode(decodeEnvelope(m.Body!).payload, OrderPlaced)).amount,
      ),
    );
    expect(amounts.sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    await receiveAll(env.sqs, env.queues.audit!.url);
  });

  it('fails before sending for an unregistered type, an invalid value or an event over the SQS body limit', async () => {
    const tx: TransactWriteItem[] = [];
    await expect(env.sender.sendInTx(tx, UserSignedUp.of({ email: 'x' }))).rejects.toThrow(
      UnknownEventTypeError,
    );
    await expect(
      env.sender.sendInTx(tx, OrderPlaced.of({ orderId: 'o', amount: 1.5 })),
    ).rejects.toThrow(EncodeError);
    const huge = OrderPlaced.of({ orderId: 'x'.repeat(420 * 1024), amount: 1 });
    await expect(env.sender.sendInTx(tx, huge)).rejects.toThrow(LimitExceededError);
    await expect(env.sender.sendInTx(tx, huge)).rejects.toThrow(
      new RegExp(`is \\d+ bytes, the limit is ${MAX_SQS_BODY_BYTES} \\(MAX_SQS_BODY_BYTES`),
    );
    expect(tx).toEqual([]);
  });

  it('ignores REMOVE records (TTL deletes)', async () => {
    await placeOrder(env, 'o-removed', 3);
    const seen: DynamoDBRecord[] = [];
    const relay = relayFor(env.sqs, routes(env));
    const { drain } = outboxPoller(env.outboxStreamArn!, {
      relay: async (records: DynamoDBRecord[]) => {
        seen.push(...records);
        return relay.relay(records);
      },
    } as never);
    await drain();
    await receiveAll(env.sqs, env.queues.billing!.url);
    await receiveAll(env.sqs, env.queues.audit!.url);
    const inserted = seen.find(
      (r) => r.eventName === 'INSERT' && r.dynamodb?.Keys?.pk?.S === 'orders#o-removed',
    );
    await env.dynamodb.send(
      new DeleteItemCommand({
        TableName: env.tables.outbox,
        Key: { pk: inserted!.dynamodb!.Keys!.pk!, sk: inserted!.dynamodb!.Keys!.sk! } as never,
      }),
    );
    await drain();
    expect(seen.some((r) => r.eventName === 'REMOVE')).toBe(true);
    expect(await receiveAll(env.sqs, env.queues.billing!.url)).toEqual([]);
  });
});

/** Fails entries of the first SendMessageBatch calls from `failFrom` on, like SQS does under load. */
function faultySqs(sqs: SQSClient, faults: number, failFrom: number): SQSClient {
  let left = faults;
  return {
    send: async (command: unknown) => {
      if (command instanceof SendMessageBatchCommand && left > 0) {
        const entries = command.input.Entries ?? [];
        if (entries.length > failFrom) {
          left--;
          const kept = entries.slice(0, failFrom);
          const out = kept.length
            ? await sqs.send(new SendMessageBatchCommand({ ...command.input, Entries: kept }))
            : { Successful: [] };
          return {
            ...out,
            Failed: entries.slice(failFrom).map((e) => ({
              Id: e.Id,
              Code: 'InternalError',
              SenderFault: false,
              Message: 'injected',
            })),
          };
        }
      }
      return sqs.send(command as never);
    },
  } as unknown as SQSClient;
}

describe('outbox relay under partial SendMessageBatch failure', () => {
  it('retries from the first failed record and delivers everything once, in order', async () => {
    const env = await setup('partial');
    const keys = ['a', 'b', 'c'];
    for (let i = 0; i < 12; i++) {
      const tx: TransactWriteItem[] = [];
      await env.sender.sendInTx(tx, withKey(orderPlaced(`o-${i}`, i), keys[i % 3]!));
      await env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
    }
    const relay = relayFor(faultySqs(env.sqs, 2, 1), { orders: [env.queues.audit!.url] });
    const { drain } = outboxPoller(env.outboxStreamArn!, relay);
    await drain();
    const got = await receiveAll(env.sqs, env.queues.audit!.url);
    const decoded = await Promise.all(
      got.map(async (m) => {
        const e = decodeEnvelope(m.Body!);
        return {
          key: e.key,
          offset: e.offset,
          value: await env.codec.decode(e.payload, OrderPlaced),
        };
      }),
    );
    expect(decoded.map((d) => d.value.amount).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 12 }, (_, i) => i),
    );
    for (const key of keys) {
      const mine = decoded.filter((d) => d.key === key);
      expect(mine.map((d) => d.value.amount)).toEqual(
        Array.from({ length: 12 }, (_, i) => i).filter((i) => keys[i % 3] === key),
      );
      const offsets = mine.map((d) => d.offset);
      expect([...offsets].sort((x, y) => (x < y ? -1 : 1))).toEqual(offsets);
    }
  });
});

describe('StreamPoller (the stream event source mapping)', () => {
  async function commit(env: Env, n: number, keys: readonly string[]) {
    for (let i = 0; i < n; i++) {
      const tx: TransactWriteItem[] = [];
      await env.sender.sendInTx(tx, withKey(orderPlaced(`o-${i}`, i), keys[i % keys.length]!));
      await env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
    }
  }

  async function amounts(env: Env, queueUrl: string) {
    return Promise.all(
      (await receiveAll(env.sqs, queueUrl)).map(async (m) => {
        const e = decodeEnvelope(m.Body!);
        return { key: e.key, amount: (await env.codec.decode(e.payload, OrderPlaced)).amount };
      }),
    );
  }

  it('retries the same batch after a handler that throws mid-batch: nothing lost, order kept', async () => {
    const env = await setup('poller-throw');
    const keys = ['a', 'b'];
    await commit(env, 10, keys);
    const relay = relayFor(env.sqs, { orders: [env.queues.audit!.url] });
    const batches: DynamoDBRecord[][] = [];
    const { drain } = outboxPoller(env.outboxStreamArn!, {
      relay: async (records: DynamoDBRecord[]) => {
        batches.push(records);
        if (batches.length === 1) {
          await relay.relay(records.slice(0, 3)); // sent part, then the relay crashes
          throw new Error('relay crashed');
        }
        return relay.relay(records);
      },
    });
    await drain();
    const seq = (b: DynamoDBRecord[]) => b.map((r) => r.dynamodb?.SequenceNumber);
    expect(batches.length).toBeGreaterThanOrEqual(2);
    expect(seq(batches[1]!).slice(0, batches[0]!.length)).toEqual(seq(batches[0]!));
    const got = await amounts(env, env.queues.audit!.url);
    expect(got.map((g) => g.amount).sort((x, y) => x - y)).toEqual([...Array(10).keys()]);
    for (const key of keys) {
      expect(got.filter((g) => g.key === key).map((g) => g.amount)).toEqual(
        [...Array(10).keys()].filter((i) => keys[i % 2] === key),
      );
    }
  });

  it('retries from the first record named in batchItemFailures, after a checkpoint at the one before', async () => {
    const env = await setup('poller-partial');
    await commit(env, 6, ['k']);
    const relay = relayFor(env.sqs, { orders: [env.queues.audit!.url] });
    const firsts: (string | undefined)[] = [];
    let failed: string | undefined;
    const { drain } = outboxPoller(env.outboxStreamArn!, {
      relay: async (records: DynamoDBRecord[]) => {
        firsts.push(records[0]?.dynamodb?.SequenceNumber);
        if (failed === undefined) {
          failed = records[2]!.dynamodb!.SequenceNumber!;
          await relay.relay(records.slice(0, 2));
          return { batchItemFailures: [{ itemIdentifier: failed }] };
        }
        return relay.relay(records);
      },
    });
    await drain();
    expect(firsts[1]).toBe(failed);
    expect((await amounts(env, env.queues.audit!.url)).map((g) => g.amount)).toEqual([
      0, 1, 2, 3, 4, 5,
    ]);
  });

  it('gives a batch up after maxRetryAttempts to onFailure and goes on after it', async () => {
    const env = await setup('poller-give-up');
    await commit(env, 3, ['k']);
    const given: DynamoDBRecord[][] = [];
    let calls = 0;
    const { drain } = outboxPoller(
      env.outboxStreamArn!,
      {
        relay: async () => {
          calls++;
          throw new Error('always');
        },
      },
      { maxRetryAttempts: 2, onFailure: (records) => void given.push(records) },
    );
    await drain();
    expect(calls).toBe(3); // the first attempt and two retries
    expect(given.map((b) => b.length)).toEqual([3]);
  });
});

describe('relay input it cannot deliver', () => {
  it('refuses a malformed outbox row and an oversize message: batch item failures, never skipped', async () => {
    const env = await setup('skip');
    const refused: { error: Error; seq: string | undefined }[] = [];
    const relay = relayFor(env.sqs, routes(env), {
      maxMessageBytes: 300,
      onRefused: (error, seq) => refused.push({ error, seq }),
    });
    const result = await relay.relay([
      { eventName: 'INSERT', dynamodb: { SequenceNumber: '1', NewImage: { pk: { S: 'x' } } } },
      {
        eventName: 'INSERT',
        dynamodb: {
          SequenceNumber: '2',
          NewImage: {
            pk: { S: 'orders#k' },
            sk: { S: 'id-1' },
            topic: { S: 'orders' },
            key: { S: 'k' },
            type: { S: 't' },
            payload: { B: Buffer.alloc(400).toString('base64') },
          },
        },
      },
    ] as DynamoDBRecord[]);
    // Lambda retries from the first, then hands the batch to relay-failures.
    expect(result).toEqual({
      batchItemFailures: [{ itemIdentifier: '1' }],
      sent: 0,
      refused: 2,
      refusedSequenceNumbers: ['1', '2'],
      // No parking place given: nothing parked (the deployed relay parks them, see poison.test.ts).
      parked: 0,
    });
    expect(refused.map((r) => r.seq)).toEqual(['1', '2']);
    expect(refused[0]!.error).toBeInstanceOf(MessageFormatError);
    expect(refused[0]!.error.message).toMatch(/malformed outbox row/);
    expect(refused[1]!.error).toBeInstanceOf(LimitExceededError);
    expect(refused[1]!.error.message).toMatch(
      /is \d+ bytes, the limit is 300 \(maxMessageBytes\)$/,
    );
  });
});
