import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, inject, it } from 'vitest';
import {
  type ConsumedMessage,
  DynamoSchemaRegistry,
  OutboxProducer,
  OutboxRelay,
  PARKED_ATTRIBUTES,
} from '../../lib/aws';
import { AvroCodec, frame } from '../../lib/core';
import { testResources } from '../helpers/aws';
import { OrderPlaced, testTopics } from '../helpers/events';
import { injectStaleReads } from '../helpers/faults';
import { type LoadBalancer, loadBalancer } from '../helpers/outage';
import { outboxPoller, receiveAll, sendNotAnEnvelope } from '../helpers/relay';
import { invokeOnSqs } from '../helpers/sqs-lambda';

const quiet = { error: () => {}, warn: () => {} };
const bytes = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
/** A schema id no registry holds. */
const UNREGISTERED_ID = 999_999;

/**
 * A consumer group `work` on topic `orders` (visibility 2 s) holding, one group each: A, an
 * `shop.OrderPlaced` event whose schema was just registered; and the poison beside it: B, a
 * payload framed with an id nobody registered; C, an event type the consumer does not know;
 * D, a body that is no envelope; E, a payload that is not Avro. A consumer decodes each with
 * `registry` (the schemas table read through a client the test breaks) and parks the poison in
 * the group's DLQ.
 */
async function scenario(label: string, registryClient: () => DynamoDBClient) {
  const env = await testResources(label, [
    { name: 'work', topics: ['orders'], visibilityTimeout: 2 },
  ]);
  const queue = env.queues.work!;
  const writer = new AvroCodec(
    new DynamoSchemaRegistry({ client: env.dynamodb, tableName: env.tables.schemas }),
  );
  const order = await writer.encode(OrderPlaced, { orderId: 'o-1', amount: 42 });
  const producer = new OutboxProducer({
    client: env.dynamodb,
    tableName: env.tables.outbox,
    topic: 'orders',
  });
  for (const [key, type, value] of [
    ['A', OrderPlaced.name, order],
    ['B', OrderPlaced.name, frame(UNREGISTERED_ID, order.subarray(5))],
    ['C', 'shop.Mystery', order],
    ['E', OrderPlaced.name, bytes('not avro')],
  ] as const) {
    await producer.publish({ key, type, value });
  }
  await outboxPoller(
    env.outboxStreamArn!,
    new OutboxRelay({ sqs: env.sqs, routes: { orders: [queue.url] }, onRefused: () => {} }),
  ).drain();
  await sendNotAnEnvelope(env.sqs, queue.url);

  const topics = testTopics();
  const codec = new AvroCodec(
    new DynamoSchemaRegistry({ client: registryClient(), tableName: env.tables.schemas }),
  );
  const decoded: { value: unknown; receiveCount: number }[] = [];
  const handler = async (m: ConsumedMessage) => {
    const value = await codec.decode(m.value, topics.typeOf(m.type));
    decoded.push({ value, receiveCount: m.receiveCount });
  };
  const options = {
    group: 'work',
    logger: quiet,
    visibility: { sqs: env.sqs, queueUrl: () => queue.url },
    deadLetter: { sqs: env.sqs, queueUrl: () => queue.dlqUrl },
  };
  return {
    decoded,
    /** Invocations until the queue has nothing visible: messages retried and parked. */
    async consume() {
      let failed = 0;
      let parked = 0;
      for (let i = 0; i < 20; i++) {
        const before = decoded.length;
        const run = await invokeOnSqs(env.sqs, queue, handler, options);
        if (run.received === 0) return { failed, parked };
        failed += run.failed;
        parked += run.received - run.failed - (decoded.length - before);
      }
      throw new Error('the queue did not empty');
    },
    /** The DLQ's messages by group: the receive they were parked at, and why. */
    async parked() {
      const dead = await receiveAll(env.sqs, queue.dlqUrl);
      return Object.fromEntries(
        dead.map((m) => {
          const a = m.MessageAttributes ?? {};
          return [
            m.Attributes!.MessageGroupId!,
            `${a[PARKED_ATTRIBUTES.errorClass]?.StringValue} at ${a[PARKED_ATTRIBUTES.receiveCount]?.StringValue}`,
          ];
        }),
      );
    },
  };
}

describe('a consumer meeting a failing service (DynamoDB Local + fauxqs)', () => {
  let balancer: LoadBalancer | undefined;
  afterEach(async () => {
    await balancer?.close();
    balancer = undefined;
  });

  it('retries, never parks, an event whose schema read met a 503 with an HTML body, and decodes it once the service is back; parks the poison beside it', async () => {
    balancer = await loadBalancer(inject('dynamodbEndpoint'));
    const lb = balancer;
    const run = await scenario(
      'html-503',
      () =>
        new DynamoDBClient({
          endpoint: lb.endpoint,
          region: 'us-east-1',
          credentials,
          maxAttempts: 1,
        }),
    );

    // The schemas table answers 503 with an HTML page: the SDK throws SyntaxError.
    expect(await run.consume()).toEqual({ failed: 2, parked: 3 });
    expect(lb.refused).toBeGreaterThanOrEqual(2);
    expect(run.decoded).toEqual([]);

    // Back (after the 2 s back-off): A decodes at its second delivery; B's id is now known to
    // be unregistered, so B is parked, a delivery late.
    lb.down = false;
    await sleep(2_200);
    expect(await run.consume()).toEqual({ failed: 0, parked: 1 });
    expect(run.decoded).toEqual([{ value: { orderId: 'o-1', amount: 42 }, receiveCount: 2 }]);
    expect(await run.parked()).toEqual({
      B: 'DecodeError at 2',
      C: 'UnknownEventTypeError at 1',
      D: 'MessageFormatError at 1',
      E: 'DecodeError at 1',
    });
  });

  it('decodes an event whose schema was registered a moment ago though an eventually consistent read misses it; parks an id no read finds', async () => {
    let stale = { missed: 0, consistent: 0 };
    const run = await scenario('lagging-registry', () => {
      const client = new DynamoDBClient({
        endpoint: inject('dynamodbEndpoint'),
        region: 'us-east-1',
        credentials,
      });
      // A replica that has not seen the registration: every eventual read of a schema misses.
      stale = injectStaleReads(client, (key) => key.pk?.S?.startsWith('id#') === true);
      return client;
    });

    expect(await run.consume()).toEqual({ failed: 0, parked: 4 });
    expect(run.decoded).toEqual([{ value: { orderId: 'o-1', amount: 42 }, receiveCount: 1 }]);
    // A's and B's ids were each read again, consistently.
    expect(stale).toEqual({ missed: 2, consistent: 2 });
    expect(await run.parked()).toEqual({
      B: 'DecodeError at 1',
      C: 'UnknownEventTypeError at 1',
      D: 'MessageFormatError at 1',
      E: 'DecodeError at 1',
    });
  });
});
