import {
  BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { DeleteMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { sqsEventOf as sqsEvent } from '../../infra/local/pollers/sqs';
import {
  AwsClient,
  type ConsumedMessage,
  consumeSqsBatch,
  DynamoAckStore,
  messageGroupId,
  OutboxProducer,
  SqsConsumer,
} from '../../lib/aws';
import { AvroCodec, ackPartition, type Message } from '../../lib/core';
import { MemorySchemaRegistry } from '../../lib/testing';
import { testResources } from '../helpers/aws';
import { outboxPoller, receive, receiveAll, relayFor } from '../helpers/relay';
import { invokeOnSqs, redriveDlq } from '../helpers/sqs-lambda';

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const bytes = (s: string) => new TextEncoder().encode(s);
const quiet = { error: () => {}, warn: () => {} };

type Env = Awaited<ReturnType<typeof testResources>>;

async function setup(
  label: string,
  maxReceiveCount = 2,
): Promise<
  Env & { publish(key: string, value: string): Promise<void>; relayAll(): Promise<void> }
> {
  const env = await testResources(label, [
    { name: 'work', topics: ['jobs'], visibilityTimeout: 2, maxReceiveCount },
  ]);
  const producer = new OutboxProducer({
    client: env.dynamodb,
    tableName: env.tables.outbox,
    topic: 'jobs',
  });
  const { drain } = outboxPoller(
    env.outboxStreamArn!,
    relayFor(env.sqs, { jobs: [env.queues.work!.url] }),
  );
  return {
    ...env,
    publish: (key, value) => producer.publish({ key, value: bytes(value) }),
    relayAll: drain,
  };
}

/**
 * A client whose BatchWriteItem calls go through `intercept` (with the table, its write
 * requests and the real call) before DynamoDB Local; for faults and orderings the emulator
 * cannot produce.
 */
function batchWrites(
  client: DynamoDBClient,
  intercept: (
    table: string,
    requests: WriteRequest[],
    send: () => Promise<unknown>,
  ) => Promise<unknown>,
): DynamoDBClient {
  return {
    send: (command: BatchWriteItemCommand) => {
      const [table, requests] = Object.entries(command.input.RequestItems ?? {})[0]!;
      return intercept(table, requests, () => client.send(command));
    },
  } as unknown as DynamoDBClient;
}

describe('OutboxProducer', () => {
  it('writes to the outbox in batches; the relay delivers each message once with per-partition offsets', async () => {
    const env = await setup('producer');
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        producer.publish({ key: `k${i % 3}`, value: bytes(String(i)) }),
      ),
    );
    await producer.close();
    await env.relayAll();
    const got = (await receiveAll(env.sqs, env.queues.work!.url)).map((m) => JSON.parse(m.Body!));
    expect(got).toHaveLength(60);
    for (const key of ['k0', 'k1', 'k2']) {
      const mine = got.filter((e) => e.key === key);
      const values = mine.map((e) => Number(Buffer.from(e.payload, 'base64').toString()));
      expect(values).toEqual([...values].sort((a, b) => a - b));
      const offsets = mine.map((e) => BigInt(e.offset));
      expect(offsets).toEqual([...offsets].sort((a, b) => (a < b ? -1 : 1)));
      expect(new Set(offsets).size).toBe(offsets.length);
    }
  });

  it('never puts two messages of one key in one request, so their order cannot swap', async () => {
    const env = await setup('per-key');
    const requests: string[][] = [];
    // Records each request on its way to DynamoDB Local (which applies a batch in order and
    // so cannot show the swap itself).
    const recording = batchWrites(env.dynamodb, (_, items, send) => {
      requests.push(items.map((r) => r.PutRequest!.Item!.pk!.S!));
      return send();
    });
    const producer = new OutboxProducer({
      client: recording,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        producer.publish({ key: i % 3 === 0 ? 'hot' : `cold-${i}`, value: bytes(String(i)) }),
      ),
    );
    for (const pks of requests) expect(new Set(pks).size).toBe(pks.length);
    expect(requests.flat()).toHaveLength(30);
    await env.relayAll();
    const hot = (await receiveAll(env.sqs, env.queues.work!.url))
      .map((m) => JSON.parse(m.Body!))
      .filter((e) => e.key === 'hot')
      .map((e) => Number(Buffer.from(e.payload, 'base64').toString()));
    expect(hot).toEqual(Array.from({ length: 10 }, (_, i) => i * 3));
  });

  it('retries items DynamoDB returns unprocessed', async () => {
    const env = await setup('unprocessed');
    let faults = 1;
    // Fault injection: the first BatchWriteItem "processes" only its first item.
    const flaky = batchWrites(env.dynamodb, async (table, requests, send) => {
      if (faults > 0 && requests.length > 1) {
        faults--;
        await env.dynamodb.send(
          new BatchWriteItemCommand({ RequestItems: { [table]: requests.slice(0, 1) } }),
        );
        return { UnprocessedItems: { [table]: requests.slice(1) } };
      }
      return send();
    });
    const producer = new OutboxProducer({
      client: flaky,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    await Promise.all(
      // Four keys, so the four items share one request (one key would take four).
      [1, 2, 3, 4].map((i) => producer.publish({ key: `k${i}`, value: bytes(String(i)) })),
    );
    await env.relayAll();
    expect(faults).toBe(0); // the fault was injected
    const got = await receiveAll(env.sqs, env.queues.work!.url);
    expect(
      got.map((m) => Buffer.from(JSON.parse(m.Body!).payload, 'base64').toString()).sort(),
    ).toEqual(['1', '2', '3', '4']);
  });
});

describe('consumeSqsBatch (Lambda batch consumer)', () => {
  let env: Awaited<ReturnType<typeof setup>>;
  let acks: DynamoAckStore;
  beforeAll(async () => {
    env = await setup('batch', 3);
    acks = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
  });

  it('fails only the failing message group, persists ack levels, and skips redelivered duplicates', async () => {
    await env.publish('A', 'a1');
    await env.publish('A', 'a2');
    await env.publish('B', 'b1');
    await env.relayAll();
    // fauxqs hands out one message per group per receive (SQS may hand out several); so the
    // batch Lambda would get, [a1, b1, a2], is gathered over a few receives.
    const first = await receiveAll(env.sqs, env.queues.work!.url);
    expect(first.map((m) => m.Attributes?.MessageGroupId).sort()).toEqual(['A', 'A', 'B']);
    const handled: string[] = [];
    const response = await consumeSqsBatch(
      sqsEvent(first, env.queues.work!.arn),
      async (m: ConsumedMessage) => {
        handled.push(text(m.value));
        if (text(m.value) === 'a1') await m.nack(new Error('a1 is not ready'));
      },
      { group: 'work', ackStore: acks, logger: quiet },
    );
    const failedIds = response.batchItemFailures.map((f) => f.itemIdentifier).sort();
    expect(failedIds).toEqual(
      first
        .filter((m) => m.Attributes?.MessageGroupId === 'A')
        .map((m) => m.MessageId)
        .sort(),
    );
    expect(handled.sort()).toEqual(['a1', 'b1']);
    const bOffset = JSON.parse(
      first.find((m) => m.Attributes?.MessageGroupId === 'B')!.Body!,
    ).offset;
    expect(await acks.load('work', ackPartition('jobs', 'B'))).toBe(BigInt(bOffset));
    // A's failed head and the message skipped behind it stay open holes.
    const aOffsets = first
      .filter((m) => m.Attributes?.MessageGroupId === 'A')
      .map((m) => BigInt(JSON.parse(m.Body!).offset))
      .sort((x, y) => (x < y ? -1 : 1));
    const aState = await acks.loadState('work', ackPartition('jobs', 'A'));
    expect([...(aState?.holes.keys() ?? [])].sort((x, y) => (x < y ? -1 : 1))).toEqual(aOffsets);

    // B succeeded but (as after a crash before deletion) comes again: acked without the handler.
    const again: string[] = [];
    const dup = await consumeSqsBatch(
      sqsEvent(
        first.filter((m) => m.Attributes?.MessageGroupId === 'B'),
        env.queues.work!.arn,
      ),
      async (m) => {
        again.push(text(m.value));
      },
      { group: 'work', ackStore: acks, logger: quiet },
    );
    expect(dup.batchItemFailures).toEqual([]);
    expect(again).toEqual([]);
  });

  it('hands Kafka-like messages: value, partition, offset, ack and nack', async () => {
    await env.publish('C', 'c1');
    await env.relayAll();
    const [m] = (await receive(env.sqs, env.queues.work!.url)).filter(
      (x) => x.Attributes?.MessageGroupId === 'C',
    );
    let seen: Message | undefined;
    await consumeSqsBatch(
      sqsEvent([m!], env.queues.work!.arn),
      async (msg) => {
        seen = msg;
        await msg.ack();
      },
      { group: 'work', ackStore: acks, logger: quiet },
    );
    // As the Lambda poller does for a success (else it comes back into the next test).
    await env.sqs.send(
      new DeleteMessageCommand({ QueueUrl: env.queues.work!.url, ReceiptHandle: m!.ReceiptHandle }),
    );
    expect(text(seen!.value)).toBe('c1');
    expect(seen!.partition).toBe('C');
    expect(seen!.offset).toBe(BigInt(JSON.parse(m!.Body!).offset));
  });

  it('settles a message by the first of ack and nack, as Cadence: acked then thrown is done, nacked then returned is retried', async () => {
    await env.publish('D', 'd1');
    await env.publish('E', 'e1');
    await env.relayAll();
    const warnings: string[] = [];
    const logger = { error: () => {}, warn: (m: string) => warnings.push(m) };
    const handled: string[] = [];
    const handler = async (m: ConsumedMessage) => {
      if (!['d1', 'e1'].includes(text(m.value))) return; // an earlier test's leftover
      handled.push(text(m.value));
      if (text(m.value) === 'd1') {
        await m.ack();
        await m.nack('too late: the ack was first');
        throw new Error('thrown after the ack');
      }
      if (text(m.value) === 'e1') {
        await m.nack('not ready');
        await m.ack();
      }
    };
    const queue = env.queues.work!;
    const seen: { id: string; body: string; failed: boolean }[] = [];
    // fauxqs may hand out the two groups in separate receives.
    for (let i = 0; i < 10 && handled.length < 2; i++) {
      const run = await invokeOnSqs(env.sqs, queue, handler, {
        group: 'work',
        ackStore: acks,
        logger,
      });
      for (const m of run.messages) {
        seen.push({
          id: m.MessageId!,
          body: m.Body!,
          failed: run.failedIds.has(m.MessageId!),
        });
      }
    }
    expect(handled.sort()).toEqual(['d1', 'e1']);
    const byValue = (v: string) =>
      seen.find((s) => text(Buffer.from(JSON.parse(s.body).payload, 'base64')) === v)!;
    expect(byValue('d1').failed).toBe(false);
    expect(byValue('e1').failed).toBe(true);
    expect(warnings.some((w) => w.includes('was acked, then its handler threw'))).toBe(true);
    expect(await acks.load('work', ackPartition('jobs', 'D'))).toBe(
      BigInt(JSON.parse(byValue('d1').body).offset),
    );
    // After the visibility timeout only the nacked message comes back; the acked one is gone.
    await new Promise((r) => setTimeout(r, 2_500));
    // (An earlier test's undeleted message may come back too: only groups D and E count.)
    const back = await receiveAll(env.sqs, queue.url);
    const ours = back.filter((m) => ['D', 'E'].includes(m.Attributes?.MessageGroupId ?? ''));
    expect(ours.map((m) => m.Attributes?.MessageGroupId)).toEqual(['E']);
    for (const m of back) {
      await env.sqs.send(
        new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: m.ReceiptHandle }),
      );
    }
  });

  it('names a key SQS cannot take by its group id: the partition is the MessageGroupId', async () => {
    const key = 'chat room/ünïcode';
    await env.publish(key, 'k1');
    await env.relayAll();
    const [m] = (await receive(env.sqs, env.queues.work!.url)).filter(
      (x) => x.Attributes?.MessageGroupId === messageGroupId(key),
    );
    expect(m, 'the message under the mapped group id').toBeDefined();
    let seen: Message | undefined;
    await consumeSqsBatch(
      sqsEvent([m!], env.queues.work!.arn),
      async (msg) => {
        seen = msg;
      },
      { group: 'work', ackStore: acks, logger: quiet },
    );
    expect(text(seen!.value)).toBe('k1');
    expect(seen!.partition).toBe(messageGroupId(key));
    expect(seen!.partition).toMatch(/^~sha256:[0-9a-f]{64}$/);
    expect(await acks.load('work', ackPartition('jobs', messageGroupId(key)))).toBe(seen!.offset);
  });

  it('nacks a malformed body, and the queue dead-letters it after maxReceiveCount', async () => {
    await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.queues.work!.url,
        MessageBody: 'this is not an envelope',
        MessageGroupId: 'broken',
        MessageDeduplicationId: `broken-${Date.now()}`,
      }),
    );
    const errors: string[] = [];
    let handlerCalls = 0;
    for (let attempt = 0; attempt < 3; attempt++) {
      const got = (await receive(env.sqs, env.queues.work!.url, 3)).filter(
        (m) => m.Attributes?.MessageGroupId === 'broken',
      );
      expect(got).toHaveLength(1);
      const response = await consumeSqsBatch(
        sqsEvent(got, env.queues.work!.arn),
        async () => {
          handlerCalls++;
        },
        {
          group: 'work',
          logger: { error: (e: string) => errors.push(e), warn: () => {} },
          visibility: {
            sqs: env.sqs,
            queueUrl: () => env.queues.work!.url,
            backoffSeconds: () => 0,
          },
        },
      );
      expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual([got[0]!.MessageId]);
    }
    expect(handlerCalls).toBe(0);
    expect(errors[0]).toMatch(/not JSON/);
    // As in SQS, the receive after the last allowed one moves the message to the DLQ.
    expect(
      (await receive(env.sqs, env.queues.work!.url, 1)).filter(
        (m) => m.Attributes?.MessageGroupId === 'broken',
      ),
    ).toEqual([]);
    const dead = await receive(env.sqs, env.queues.work!.dlqUrl, 3);
    expect(dead.map((m) => m.Body)).toEqual(['this is not an envelope']);
  });
});

describe('DynamoAckStore ack state', () => {
  it('merges concurrent commits: the level never regresses and no hole is lost', async () => {
    const env = await setup('ack-state');
    const store = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
    const basis = { state: await store.loadState('g', 'p') };
    // Every writer starts from the same (stale) read: the version condition makes them merge.
    await Promise.all(
      [10n, 40n, 20n, 30n].map((level) =>
        store.commit('g', 'p', { level, open: [level - 1n], now: 1 }, basis),
      ),
    );
    const state = await store.loadState('g', 'p');
    expect(state?.ackLevel).toBe(40n);
    expect([...(state?.holes.keys() ?? [])].sort((a, b) => (a < b ? -1 : 1))).toEqual([
      9n,
      19n,
      29n,
      39n,
    ]);
    await store.commit('g', 'p', { level: 5n, close: [19n, 29n], now: 2 });
    const after = await store.loadState('g', 'p');
    expect(after?.ackLevel).toBe(40n);
    expect([...(after?.holes.keys() ?? [])].sort((a, b) => (a < b ? -1 : 1))).toEqual([9n, 39n]);
    expect(await store.load('g', 'p')).toBe(40n);
  });
});

describe('DynamoAckStore item lifecycle', () => {
  it('stamps expiresAt (seconds) from each write and keeps the floor the state was created with', async () => {
    const env = await setup('ack-ttl');
    const store = new DynamoAckStore({
      client: env.dynamodb,
      tableName: env.tables.acks,
      ttlSeconds: 3600,
    });
    const t0 = Date.UTC(2100, 0, 1);
    const raw = async () =>
      (
        await env.dynamodb.send(
          new GetItemCommand({ TableName: env.tables.acks, Key: { pk: { S: 'g#p' } } }),
        )
      ).Item!;
    await store.commit('g', 'p', { level: 20n, floor: 10n, now: t0 });
    expect((await raw()).expiresAt?.N).toBe(String(t0 / 1000 + 3600));
    await store.commit('g', 'p', { level: 30n, floor: 25n, now: t0 + 60_000 });
    expect((await raw()).expiresAt?.N).toBe(String(t0 / 1000 + 60 + 3600));
    const state = await store.loadState('g', 'p');
    expect([state?.floor, state?.ackLevel]).toEqual([10n, 30n]);
  });
});

describe('consumeSqsBatch and a DLQ redrive', () => {
  it('handles a redriven poison message exactly once after later offsets of its partition succeeded', async () => {
    const env = await setup('redrive', 2);
    const acks = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
    await env.publish('R', 'poison');
    await env.publish('R', 'n1');
    await env.publish('R', 'n2');
    await env.relayAll();
    const calls: string[] = [];
    const offsets = new Map<string, bigint>();
    let fixed = false;
    const handler = async (m: ConsumedMessage) => {
      calls.push(text(m.value));
      offsets.set(text(m.value), m.offset);
      if (text(m.value) === 'poison' && !fixed) throw new Error('cannot handle yet');
    };
    const options = {
      group: 'work',
      ackStore: acks,
      logger: quiet,
      visibility: { sqs: env.sqs, queueUrl: () => env.queues.work!.url, backoffSeconds: () => 0 },
    };
    const queue = env.queues.work!;
    const until = async (done: () => boolean) => {
      const deadline = Date.now() + 20_000;
      while (!done() && Date.now() < deadline) {
        if ((await invokeOnSqs(env.sqs, queue, handler, options)).received === 0)
          await new Promise((r) => setTimeout(r, 50));
      }
    };
    await until(() => calls.includes('n2'));
    expect(calls).toEqual(['poison', 'poison', 'n1', 'n2']);
    const poisonOffset = offsets.get('poison')!;
    const state = await acks.loadState('work', ackPartition('jobs', 'R'));
    expect(state!.ackLevel > poisonOffset).toBe(true);
    expect([...state!.holes.keys()]).toEqual([poisonOffset]);

    fixed = true;
    const moved = await redriveDlq(env.sqs, queue.dlqUrl, queue.url);
    expect(moved).toHaveLength(1);
    await until(() => calls.length === 5);
    expect(calls).toEqual(['poison', 'poison', 'n1', 'n2', 'poison']);
    expect((await acks.loadState('work', ackPartition('jobs', 'R')))!.holes.size).toBe(0);

    // The same message once more (a second redrive, or Lambda delivering it twice).
    await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: queue.url,
        MessageBody: moved[0]!,
        MessageGroupId: 'R',
        MessageDeduplicationId: `again-${Date.now()}`,
      }),
    );
    expect((await invokeOnSqs(env.sqs, queue, handler, options)).received).toBe(1);
    expect(calls).toHaveLength(5);
    expect(await receive(env.sqs, queue.url)).toEqual([]);
    expect(await receive(env.sqs, queue.dlqUrl)).toEqual([]);
  });
});

describe('consumeSqsBatch with undecodable Avro', () => {
  it('nacks a payload that is not Confluent-framed Avro with a DecodeError, dead-letters it, and keeps other groups flowing', async () => {
    const env = await setup('avro', 2);
    const codec = new AvroCodec(new MemorySchemaRegistry());
    await env.publish('garbage', 'not avro at all');
    await env.publish('fine', 'plain');
    await env.relayAll();
    const errors: string[] = [];
    const handled: string[] = [];
    const handler = async (m: ConsumedMessage) => {
      if (m.partition === 'garbage') await codec.decode(m.value);
      handled.push(m.partition);
    };
    for (let attempt = 0; attempt < 2; attempt++) {
      const got = await receive(env.sqs, env.queues.work!.url, 1);
      const response = await consumeSqsBatch(sqsEvent(got, env.queues.work!.arn), handler, {
        group: 'work',
        logger: { error: (e: string) => errors.push(e), warn: () => {} },
        visibility: { sqs: env.sqs, queueUrl: () => env.queues.work!.url, backoffSeconds: () => 0 },
      });
      const garbage = got.filter((m) => m.Attributes?.MessageGroupId === 'garbage');
      expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(
        garbage.map((m) => m.MessageId),
      );
      for (const m of got.filter((x) => x.Attributes?.MessageGroupId === 'fine')) {
        await env.sqs.send(
          new DeleteMessageCommand({
            QueueUrl: env.queues.work!.url,
            ReceiptHandle: m.ReceiptHandle,
          }),
        );
      }
    }
    expect(handled).toEqual(['fine']);
    expect(errors[0]).toMatch(/magic byte/i);
    expect(await receive(env.sqs, env.queues.work!.url, 1)).toEqual([]);
    const dead = await receive(env.sqs, env.queues.work!.dlqUrl, 1);
    expect(dead.map((m) => JSON.parse(m.Body!).key)).toEqual(['garbage']);
  });
});

describe('SqsConsumer (long polling)', () => {
  it('acks, retries a nack with back-off, dead-letters, and keeps other groups flowing', async () => {
    const env = await setup('poll', 2);
    await env.publish('bad', 'poison');
    await env.publish('bad', 'after');
    await env.publish('good', 'g1');
    await env.publish('good', 'g2');
    await env.relayAll();
    const consumer = new SqsConsumer({
      sqs: env.sqs,
      queueUrl: env.queues.work!.url,
      waitTimeSeconds: 1,
      visibilityTimeout: 5,
      backoffSeconds: () => 0,
      logger: quiet,
    });
    await consumer.start();
    const seen: string[] = [];
    const deadline = Date.now() + 20_000;
    for await (const m of consumer.messages()) {
      const v = text(m.value);
      seen.push(`${m.partition}:${v}`);
      if (v === 'poison') await m.nack(new Error('cannot'));
      else await m.ack();
      if (seen.includes('bad:after') || Date.now() > deadline) break;
    }
    await consumer.stop();
    expect(seen.filter((s) => s.startsWith('good:'))).toEqual(['good:g1', 'good:g2']);
    expect(seen.filter((s) => s.startsWith('bad:'))).toEqual([
      'bad:poison',
      'bad:poison',
      'bad:after',
    ]);
    const dead = await receive(env.sqs, env.queues.work!.dlqUrl, 2);
    expect(dead.map((m) => Buffer.from(JSON.parse(m.Body!).payload, 'base64').toString())).toEqual([
      'poison',
    ]);
    expect(await receive(env.sqs, env.queues.work!.url)).toEqual([]);
  });

  it('keeps a message invisible with a heartbeat while it is processed', async () => {
    const env = await setup('heartbeat');
    await env.publish('slow', 'job');
    await env.relayAll();
    const consumer = new SqsConsumer({
      sqs: env.sqs,
      queueUrl: env.queues.work!.url,
      waitTimeSeconds: 1,
      visibilityTimeout: 2,
      logger: quiet,
    });
    await consumer.start();
    for await (const m of consumer.messages()) {
      // Longer than the visibility timeout: without the heartbeat SQS would hand it out again.
      await new Promise((r) => setTimeout(r, 3500));
      expect(await receive(env.sqs, env.queues.work!.url)).toEqual([]);
      await m.ack();
      break;
    }
    await consumer.stop();
    await new Promise((r) => setTimeout(r, 2500));
    expect(await receive(env.sqs, env.queues.work!.url)).toEqual([]);
  });

  it('returns unsettled messages on stop', async () => {
    const env = await setup('stop');
    await env.publish('k', 'v');
    await env.relayAll();
    const consumer = new SqsConsumer({
      sqs: env.sqs,
      queueUrl: env.queues.work!.url,
      waitTimeSeconds: 1,
      visibilityTimeout: 30,
      logger: quiet,
    });
    await consumer.start();
    for await (const _m of consumer.messages()) {
      await consumer.stop();
    }
    const again = await receive(env.sqs, env.queues.work!.url);
    expect(again).toHaveLength(1);
  });
});

describe('AwsClient (Client on DynamoDB + SQS)', () => {
  it('publishes through the outbox and consumes from the group queue with offsets from one sequence', async () => {
    const env = await setup('client');
    const client = new AwsClient({
      dynamodb: env.dynamodb,
      sqs: env.sqs,
      outboxTable: env.tables.outbox,
      applications: { shop: { topic: 'jobs' } },
      queues: { work: env.queues.work!.url },
      consumer: { waitTimeSeconds: 1, logger: quiet },
    });
    const producer = client.newProducer('shop');
    await Promise.all(
      ['a1', 'a2', 'b1'].map((v) => producer.publish({ key: v[0]!, value: bytes(v) })),
    );
    await producer.close();
    await env.relayAll();

    const consumer = client.newConsumer('shop', 'work');
    await consumer.start();
    const seen: Message[] = [];
    const deadline = Date.now() + 15_000;
    for await (const m of consumer.messages()) {
      seen.push(m);
      await m.ack();
      if (seen.length === 3 || Date.now() > deadline) break;
    }
    await consumer.stop();
    const of = (p: string) => seen.filter((m) => m.partition === p);
    expect(of('a').map((m) => text(m.value))).toEqual(['a1', 'a2']);
    expect(of('a')[0]!.offset < of('a')[1]!.offset).toBe(true);
    expect(of('b').map((m) => text(m.value))).toEqual(['b1']);
    expect(await receive(env.sqs, env.queues.work!.url)).toEqual([]);
  });

  it('names an unknown application or consumer group', async () => {
    const env = await setup('client-errors');
    const client = new AwsClient({
      dynamodb: env.dynamodb,
      sqs: env.sqs,
      outboxTable: env.tables.outbox,
      applications: { shop: { topic: 'jobs' } },
      queues: { work: env.queues.work!.url },
    });
    expect(() => client.newProducer('ghost')).toThrow(/unknown application: ghost/);
    expect(() => client.newConsumer('shop', 'ghosts')).toThrow(/unknown consumer group: ghosts/);
  });
});

describe('consumeSqsBatch over several topics', () => {
  it('handles a message of one topic whose offset is below a handled one of another topic with the same key', async () => {
    const env = await testResources('cross-topic', [
      { name: 'multi', topics: ['ta', 'tb'], visibilityTimeout: 2, maxReceiveCount: 3 },
    ]);
    const acks = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
    const queue = env.queues.multi!;
    const producerOf = (topic: string) =>
      new OutboxProducer({ client: env.dynamodb, tableName: env.tables.outbox, topic });
    // tb's event is written first, so its offset (stream sequence number) is the lower one;
    // the two outbox partitions (`ta#K`, `tb#K`) may sit on different stream shards, whose
    // relays run independently: ta's message can reach the queue, and be handled, first.
    await producerOf('tb').publish({ key: 'K', value: bytes('b1') });
    await producerOf('ta').publish({ key: 'K', value: bytes('a1') });
    const { drain } = outboxPoller(
      env.outboxStreamArn!,
      relayFor(env.sqs, { ta: [queue.url], tb: [queue.url] }),
    );
    await drain();
    const got = await receiveAll(env.sqs, queue.url);
    const ofTopic = (t: string) => got.filter((m) => JSON.parse(m.Body!).topic === t);
    expect(ofTopic('ta')).toHaveLength(1);
    expect(ofTopic('tb')).toHaveLength(1);
    const offsetOf = (t: string) => BigInt(JSON.parse(ofTopic(t)[0]!.Body!).offset);
    expect(offsetOf('tb') < offsetOf('ta')).toBe(true);

    const handled: string[] = [];
    const options = { group: 'multi', ackStore: acks, logger: quiet };
    const handler = async (m: ConsumedMessage) => {
      handled.push(`${m.topic}:${text(m.value)}`);
    };
    await consumeSqsBatch(sqsEvent(ofTopic('ta'), queue.arn), handler, options);
    const late = await consumeSqsBatch(sqsEvent(ofTopic('tb'), queue.arn), handler, options);
    expect(late.batchItemFailures).toEqual([]);
    expect(handled).toEqual(['ta:a1', 'tb:b1']);
    expect(await acks.load('multi', ackPartition('ta', 'K'))).toBe(offsetOf('ta'));
    expect(await acks.load('multi', ackPartition('tb', 'K'))).toBe(offsetOf('tb'));

    // Both in one batch, the higher offset first: each is read in its own partition.
    await producerOf('tb').publish({ key: 'L', value: bytes('b2') });
    await producerOf('ta').publish({ key: 'L', value: bytes('a2') });
    await drain();
    const second = await receiveAll(env.sqs, queue.url);
    const byTopic = (t: string) => second.filter((m) => JSON.parse(m.Body!).topic === t);
    handled.length = 0;
    const failing = async (m: ConsumedMessage) => {
      handled.push(`${m.topic}:${text(m.value)}`);
      if (m.topic === 'tb') throw new Error('tb is down');
    };
    await consumeSqsBatch(
      sqsEvent([...byTopic('ta'), ...byTopic('tb')], queue.arn),
      failing,
      options,
    );
    expect(handled).toEqual(['ta:a2', 'tb:b2']);
    // b2 failed: its redelivery is handled, not acked under ta's higher level.
    handled.length = 0;
    await consumeSqsBatch(sqsEvent(byTopic('tb'), queue.arn), handler, options);
    expect(handled).toEqual(['tb:b2']);
  });
});
