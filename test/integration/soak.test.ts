import {
  CreateTableCommand,
  DynamoDBClient,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBRecord, SQSBatchResponse } from 'aws-lambda';
import { describe, expect, inject, it, onTestFinished, vi } from 'vitest';
import { StreamPoller } from '../../infra/local/pollers/stream';
import {
  type ConsumedMessage,
  DynamoAckStore,
  DynamoOutbox,
  DynamoSchemaRegistry,
  OutboxProducer,
  OutboxRelay,
} from '../../lib/aws';
import {
  type AckStore,
  AvroCodec,
  ackPartition,
  createEventSender,
  defineEvent,
  EventTopics,
} from '../../lib/core';
import { testResources } from '../helpers/aws';
import {
  fastRetry,
  injectThrottling,
  seededChance,
  seededRandom,
  type Throttle,
} from '../helpers/faults';
import { receive } from '../helpers/relay';
import { invokeOnSqs, redriveDlq } from '../helpers/sqs-lambda';

/**
 * The whole path under faults: thousands of events over many keys through the outbox
 * (`sendInTx` and `OutboxProducer`), the DynamoDB Stream (`StreamPoller`), `OutboxRelay`,
 * SQS FIFO (fauxqs) and `consumeSqsBatch` with a `DynamoAckStore`.
 *
 * What the library promises, and so what is asserted: handler calls are at least once; a
 * message whose success was recorded (the batch's ack write) is never handed over again;
 * it is handed over again exactly when its success was not recorded (the invocation
 * crashed after its effect, or the ack write failed), and then with a receive count > 1.
 * The one exception is a batch slower than the visibility timeout: its messages may be
 * received and handled again before it records them; the test counts such invocations.
 * Effects are non-idempotent appends counted per event id, so every extra call shows; the
 * application makes its effects exactly once by checking the offset it recorded with
 * the effect (here: a set of applied offsets per key).
 *
 * Faults come from the seed: a handler's failure or crash from (seed, key, seq, receive
 * count), the same in every run; SDK throttles and relay crashes from one seeded sequence
 * in call order, so where they land varies with timing. The assertions hold wherever.
 */

const KEYS = 50;
const PER_KEY = 50; // 2,500 events
const SEED = 20261203;
const MAX_RECEIVE = 5;
/**
 * Longer than a batch usually takes on a loaded 2-core CI machine. A message whose
 * visibility ends while its batch still runs can be received again before that batch
 * records its success, as by Lambda with a visibility timeout under the function's run
 * time (the deployed queues take 6× it, infra/deploy/definitions.ts). Such an invocation is
 * counted as overrun, and its effects may come twice: see `exposed`.
 */
const VISIBILITY_SECONDS = 6;
const POISON = { key: 'k7', seq: 10 };

const Step = defineEvent<{ key: string; seq: number }>({
  name: 'soak.Step',
  topic: 'soak',
  schema: {
    type: 'record',
    fields: [
      { name: 'key', type: 'string' },
      { name: 'seq', type: 'int' },
    ],
  },
  key: (v) => v.key,
});

const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const quiet = { error: () => {}, warn: () => {}, info: () => {} };

describe('soak: outbox → stream → relay → SQS FIFO → batch consumer, under faults', () => {
  it('loses nothing, duplicates only unrecorded successes, keeps per-key order, and redrives the poison once', async () => {
    const started = Date.now();
    // OutboxRelay reports failed sends on console.error; here they are injected.
    const errors = vi.spyOn(console, 'error').mockImplementation(() => {});
    onTestFinished(() => errors.mockRestore());
    const random = seededRandom(SEED);
    const chance = (p: number) => random() < p;
    const faults = {
      throttledAbsorbed: 0,
      throttledSurfaced: 0,
      relayCrashes: 0,
      handlerFailures: 0,
      crashesAfterEffect: 0,
      ackWriteFailures: 0,
      consumerRestarts: 0,
      poisonFailures: 0,
    };
    const throttle =
      (commands: Record<string, [once: number, always: number]>) =>
      (command: string): Throttle => {
        const p = commands[command];
        if (!p) return 'none';
        if (chance(p[1])) {
          faults.throttledSurfaced++;
          return 'always';
        }
        if (chance(p[0])) {
          faults.throttledAbsorbed++;
          return 'once';
        }
        return 'none';
      };
    const local = (service: 'dynamodbEndpoint' | 'sqsEndpoint') => ({
      endpoint: inject(service),
      region: 'us-east-1',
      credentials,
      retryStrategy: fastRetry(3),
    });
    const throttled = <C extends Parameters<typeof injectThrottling>[0]>(
      client: C,
      commands: Record<string, [number, number]>,
    ): C => {
      injectThrottling(client, throttle(commands));
      return client;
    };
    const dynamodbClient = (commands: Record<string, [number, number]>) =>
      throttled(new DynamoDBClient(local('dynamodbEndpoint')), commands);
    const sqsClient = (commands: Record<string, [number, number]>) =>
      throttled(new SQSClient(local('sqsEndpoint')), commands);

    const env = await testResources('soak', [
      {
        name: 'soak',
        topics: ['soak'],
        visibilityTimeout: VISIBILITY_SECONDS,
        maxReceiveCount: MAX_RECEIVE,
      },
    ]);
    const queue = env.queues.soak!;
    const business = `${env.prefix}-business`;
    await env.dynamodb.send(
      new CreateTableCommand({
        TableName: business,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    const registry = new DynamoSchemaRegistry({
      client: env.dynamodb,
      tableName: env.tables.schemas,
    });
    const codec = new AvroCodec(registry);

    // --- writers: per key in order, half in the caller's transaction, half buffered ---
    const writerDb = dynamodbClient({
      TransactWriteItemsCommand: [0.02, 0],
      BatchWriteItemCommand: [0.02, 0],
    });
    const sender = await createEventSender<TransactWriteItem[]>({
      topics: new EventTopics().register(Step),
      registry,
      outbox: new DynamoOutbox({ tableName: env.tables.outbox }),
    }).initialize();
    const producer = new OutboxProducer({
      client: writerDb,
      tableName: env.tables.outbox,
      topic: 'soak',
    });
    const writes = (async () => {
      await Promise.all(
        Array.from({ length: KEYS }, async (_, k) => {
          const key = `k${k}`;
          for (let seq = 0; seq < PER_KEY; seq++) {
            if (seq % 2 === 0) {
              const tx: TransactWriteItem[] = [
                { Put: { TableName: business, Item: { pk: { S: `${key}-${seq}` } } } },
              ];
              await sender.sendInTx(tx, Step.of({ key, seq }));
              await writerDb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
            } else {
              await producer.publish({
                key,
                value: new TextEncoder().encode(JSON.stringify({ key, seq })),
              });
            }
          }
        }),
      );
      await producer.close();
    })();

    // --- the stream relay: throttled SendMessageBatch, crashes after sending part ---
    const relay = new OutboxRelay({
      sqs: sqsClient({ SendMessageBatchCommand: [0.03, 0.01] }),
      routes: { soak: [queue.url] },
      onRefused: () => {},
      // Throttled sends are tried again within the call, with short delays here.
      retryDelaysMs: [5, 10, 20],
    });
    let relayCalls = 0;
    const streams = new DynamoDBStreamsClient({
      endpoint: inject('dynamodbEndpoint'),
      region: 'us-east-1',
      credentials,
      retryStrategy: fastRetry(3),
    });
    injectThrottling(streams, throttle({ GetRecordsCommand: [0.02, 0.005] }));
    const poller = new StreamPoller({
      streams,
      streamArn: env.outboxStreamArn!,
      batchSize: 100,
      idleMs: 20,
      retryDelayMs: 20,
      logger: quiet,
      handler: async (records: DynamoDBRecord[]) => {
        relayCalls++;
        // At least one crash per run: the first batch of several records after the first call.
        const first = faults.relayCrashes === 0 && relayCalls >= 2;
        if (records.length > 1 && (first || chance(0.1))) {
          faults.relayCrashes++;
          await relay.relay(records.slice(0, Math.floor(records.length / 2)));
          throw new Error('injected relay crash');
        }
        return relay.relay(records);
      },
    });
    poller.start();

    // --- the consumer: effects counted per event id, app-level dedup by offset ---
    const calls = new Map<string, number>(); // handler calls that reached the effect
    const unrecorded = new Map<string, number>(); // effects whose success was not recorded
    // Effects of invocations that outlived their messages' visibility (recorded, but maybe
    // after another invocation had received the message again).
    const exposed = new Map<string, number>();
    const handovers = new Map<string, string[]>(); // per event id, to explain a failure
    let overruns = 0;
    const order = new Map<string, { seq: number; redrive: boolean }[]>(); // effects per key
    const applied = new Map<string, Set<bigint>>(); // the application's offsets, with its effects
    const eventOf = new Map<string, { key: string; seq: number }>();
    let duplicatesDetected = 0;
    let duplicateWithoutRedelivery = 0;
    let handlerCalls = 0;
    let fixed = false;
    let redriving = false;
    let invocations = 0;
    const bump = (m: Map<string, number>, id: string) => m.set(id, (m.get(id) ?? 0) + 1);

    const consumerClients = () => ({
      sqs: sqsClient({
        ReceiveMessageCommand: [0.02, 0.005],
        DeleteMessageBatchCommand: [0.02, 0.005],
      }),
      acks: new DynamoAckStore({
        client: dynamodbClient({ GetItemCommand: [0.02, 0.003], UpdateItemCommand: [0.03, 0.01] }),
        tableName: env.tables.acks,
      }),
    });

    const invokeOnce = async (clients: ReturnType<typeof consumerClients>) => {
      invocations++;
      const invocation = invocations;
      const began = Date.now();
      const effects: { id: string; partition: string }[] = [];
      const commitFailed = new Set<string>();
      let dead = false;
      let crash!: () => void;
      const crashed = new Promise<never>((_, reject) => {
        crash = () => reject(new Error('crashed'));
      });
      crashed.catch(() => {});
      // Sees whether this invocation's ack writes failed (after the SDK's retries).
      const store: AckStore = {
        load: (g, p) => clients.acks.load(g, p),
        save: (g, p, l) => clients.acks.save(g, p, l),
        loadState: (g, p) => clients.acks.loadState(g, p),
        commit: async (g, p, u, b) => {
          try {
            return await clients.acks.commit(g, p, u, b);
          } catch (error) {
            commitFailed.add(p);
            faults.ackWriteFailures++;
            throw error;
          }
        },
      };
      const handler = async (m: ConsumedMessage) => {
        if (dead) return new Promise<never>(() => {}); // nothing runs after a crash
        handlerCalls++;
        const value =
          m.type === Step.name
            ? await codec.decode(m.value, Step)
            : (JSON.parse(new TextDecoder().decode(m.value)) as { key: string; seq: number });
        if (value.key === POISON.key && value.seq === POISON.seq && !fixed) {
          faults.poisonFailures++;
          throw new Error('poison: cannot be handled until the handler is fixed');
        }
        // Per delivery (event, receive count), so a run repeats whatever the interleaving.
        const coin = (what: string) =>
          seededChance(SEED, what, value.key, value.seq, m.receiveCount);
        if (coin('fail') < 0.015) {
          faults.handlerFailures++;
          if (coin('how') < 0.5) throw new Error('injected handler failure');
          await m.nack(new Error('injected nack'));
          return;
        }
        // The effect: a non-idempotent append, counted per event id.
        eventOf.set(m.id, value);
        bump(calls, m.id);
        // The ack state's partition (per topic and key): what a failed ack write names.
        effects.push({ id: m.id, partition: ackPartition(m.topic, m.partition) });
        handovers.set(m.id, [
          ...(handovers.get(m.id) ?? []),
          `#${invocation} rc=${m.receiveCount} +${Date.now() - began}ms`,
        ]);
        const list = order.get(value.key) ?? [];
        list.push({ seq: value.seq, redrive: redriving });
        order.set(value.key, list);
        const mine = applied.get(m.partition) ?? new Set<bigint>();
        applied.set(m.partition, mine);
        if (mine.has(m.offset)) {
          duplicatesDetected++;
          if (m.receiveCount <= 1) duplicateWithoutRedelivery++;
        } else mine.add(m.offset);
        if (coin('crash') < 0.003) {
          faults.crashesAfterEffect++;
          dead = true;
          crash();
          return new Promise<never>(() => {});
        }
      };
      let result: Awaited<ReturnType<typeof invokeOnSqs>> | undefined;
      try {
        result = await invokeOnSqs(
          clients.sqs,
          queue,
          handler,
          {
            group: 'soak',
            ackStore: store,
            logger: quiet,
            visibility: { sqs: clients.sqs, queueUrl: () => queue.url, backoffSeconds: () => 0 },
          },
          (run) => Promise.race([run(), crashed]) as Promise<SQSBatchResponse>,
        );
        return result;
      } finally {
        // Also when a surfaced delete throttle rejects the invocation after its ack writes:
        // a partition whose write failed is handed over again all the same.
        const crashedRun = result?.crashed ?? false;
        // From before its receive to after its deletes: an upper bound of the messages' time
        // in flight, so an invocation under the visibility timeout cannot have been overtaken.
        const took = Date.now() - began;
        const overran = !crashedRun && took >= VISIBILITY_SECONDS * 1000 - 500;
        if (overran) overruns++;
        for (const e of effects) {
          if (crashedRun || commitFailed.has(e.partition)) bump(unrecorded, e.id);
          else if (overran) bump(exposed, e.id);
          if (overran) handovers.get(e.id)?.push(`#${invocation} took ${took}ms`);
        }
      }
    };

    const attributes = async (url: string) => {
      const out = await env.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      const a = out.Attributes ?? {};
      return (
        Number(a.ApproximateNumberOfMessages ?? 0) +
        Number(a.ApproximateNumberOfMessagesNotVisible ?? 0)
      );
    };
    const applyingDone = () => [...applied.values()].reduce((n, s) => n + s.size, 0);

    /** Consumer workers (concurrent Lambda instances, restarted now and then) until `done`. */
    const consume = async (done: () => Promise<boolean>, deadline: number) => {
      let stop = false;
      const workers = Array.from({ length: 4 }, async () => {
        let clients = consumerClients();
        let n = 0;
        while (!stop) {
          if (++n % 25 === 0) {
            faults.consumerRestarts++;
            clients = consumerClients(); // a cold start: new clients, store, no state
          }
          try {
            const r = await invokeOnce(clients);
            if (r.received === 0) await new Promise((res) => setTimeout(res, 20));
          } catch {
            await new Promise((res) => setTimeout(res, 20)); // a surfaced receive/delete throttle
          }
        }
      });
      while (!(await done())) {
        if (Date.now() > deadline) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      stop = true;
      await Promise.all(workers);
    };

    const total = KEYS * PER_KEY;
    let writesDone = false;
    void writes.then(() => {
      writesDone = true;
    });
    await consume(
      async () =>
        writesDone &&
        applyingDone() === total - 1 &&
        (await attributes(queue.url)) === 0 &&
        (await attributes(queue.dlqUrl)) === 1,
      started + 75_000,
    );
    await writes;
    await poller.stop();

    // Exactly the poison is in the DLQ; fix the handler and redrive it.
    expect(applyingDone()).toBe(total - 1);
    if ((await attributes(queue.dlqUrl)) !== 1) {
      // What else went to the DLQ, to see why.
      const dead = await receive(env.sqs, queue.dlqUrl);
      console.log(
        dead.map((m) => {
          const b = JSON.parse(m.Body!);
          return `${b.key}@${b.offset} id=${b.id} rc=${m.Attributes?.ApproximateReceiveCount} calls=${calls.get(b.id)} unrec=${unrecorded.get(b.id)}`;
        }),
      );
    }
    expect(await attributes(queue.dlqUrl)).toBe(1);
    fixed = true;
    redriving = true;
    const moved = await redriveDlq(env.sqs, queue.dlqUrl, queue.url);
    expect(moved.map((b) => JSON.parse(b).key)).toEqual([POISON.key]);
    await consume(
      async () =>
        applyingDone() === total &&
        (await attributes(queue.url)) === 0 &&
        (await attributes(queue.dlqUrl)) === 0,
      Date.now() + 20_000,
    );

    const ids = [...eventOf.keys()];
    const extra = ids.reduce((n, id) => n + (calls.get(id) ?? 0) - 1, 0);
    console.log(
      `soak: ${total} events over ${KEYS} keys in ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
        `${handlerCalls} handler calls, ${invocations} consumer invocations, ${relayCalls} relay calls; ` +
        `${extra} duplicate effect calls (${duplicatesDetected} detected by offset); ` +
        `${overruns} invocations outlived the visibility timeout; faults: ${JSON.stringify(faults)}`,
    );

    // Zero lost: every event reached its effect; the application applied each offset once.
    expect(ids).toHaveLength(total);
    expect(applyingDone()).toBe(total);
    // Zero unexplained duplicates: an event is handed over again exactly as often as its
    // success went unrecorded (plus at most once per overrun invocation that handled it), and
    // every such call is a redelivery the offset recognises.
    for (const id of ids) {
      const least = 1 + (unrecorded.get(id) ?? 0);
      const n = calls.get(id) ?? 0;
      const why = `${JSON.stringify(eventOf.get(id))} handed over ${n}×: ${handovers.get(id)?.join(', ')}`;
      expect(n, why).toBeGreaterThanOrEqual(least);
      expect(n, why).toBeLessThanOrEqual(least + (exposed.get(id) ?? 0));
    }
    expect(duplicatesDetected).toBe(extra);
    expect(duplicateWithoutRedelivery).toBe(0);
    // Per-key order: effects follow the commit order; the poison comes only at the redrive.
    for (let k = 0; k < KEYS; k++) {
      const key = `k${k}`;
      const list = order.get(key) ?? [];
      const live = list.filter((e) => !e.redrive).map((e) => e.seq);
      for (let i = 1; i < live.length; i++) expect(live[i]! >= live[i - 1]!).toBe(true);
      const expected = [...Array(PER_KEY).keys()].filter(
        (s) => key !== POISON.key || s !== POISON.seq,
      );
      expect([...new Set(live)]).toEqual(expected);
      // A redriven success whose ack write failed comes again, as any unrecorded success
      // does: those repeats are held to their count above, so only which events is asked here.
      expect([...new Set(list.filter((e) => e.redrive).map((e) => e.seq))]).toEqual(
        key === POISON.key ? [POISON.seq] : [],
      );
    }
    // Other faults in its batches also count deliveries of the poison.
    expect(faults.poisonFailures).toBeLessThanOrEqual(MAX_RECEIVE);
    for (const [name, n] of Object.entries(faults)) expect(n, name).toBeGreaterThan(0);
  }, 120_000);
});
