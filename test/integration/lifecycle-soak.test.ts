import {
  ScanCommand,
  type ScanCommandInput,
  type ScanCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { DeleteMessageCommand, type Message as SqsMessage } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import type { TableName } from '../../infra/deploy/names';
import { sqsEventOf } from '../../infra/local/pollers/sqs';
import { consumeSqsBatch, DynamoAckStore, DynamoBroker, OutboxProducer } from '../../lib/aws';
import { newEventId } from '../../lib/core';
import { testResources } from '../helpers/aws';
import { RecordingBroadcaster } from '../helpers/broadcaster';
import { FakeClock } from '../helpers/clock';
import { outboxPoller, receiveAll, relayFor } from '../helpers/relay';

const DAY = 24 * 3600;
const quiet = { error: () => {}, warn: () => {} };

/**
 * Every item the event path writes has a lifecycle: after N events and the clock moved past
 * every TTL, what is left does not grow with N.
 *
 * Each event is what `sendAsync` without a key writes (its own key, the event id), goes
 * through the outbox, the stream relay and SQS FIFO to `consumeSqsBatch` with a
 * `DynamoAckStore` (an ack item per key), and its handler appends it to a stream of its own
 * (`DynamoBroker`: a history message and a stream meta item) and commits and finishes a
 * session. DynamoDB Local does not delete expired items on a simulated clock, so an item
 * counts as left when its `expiresAt` is missing or after the simulated time (what DynamoDB
 * TTL keeps). The clock starts in 2100 (FakeClock), so the emulator's own sweeper never
 * touches them.
 */
describe('item lifecycle soak', () => {
  it('leaves a bounded number of items after N events once every TTL has passed', async () => {
    const env = await testResources('lifecycle', [
      { name: 'work', topics: ['jobs'], visibilityTimeout: 30, maxReceiveCount: 3 },
    ]);
    // A quarter second past a whole second: a TTL computed as ms / 1000 would be fractional.
    const clock = new FakeClock(Date.UTC(2100, 0, 1) + 250);
    const queue = env.queues.work!;
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: 'jobs',
      clock,
    });
    const acks = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
    const broker = new DynamoBroker({
      client: env.dynamodb,
      historyTable: env.tables.history,
      sessionsTable: env.tables.sessions,
      broadcaster: new RecordingBroadcaster(),
      clock,
    });
    const { drain } = outboxPoller(env.outboxStreamArn!, relayFor(env.sqs, { jobs: [queue.url] }));
    let handled = 0;

    const run = async (events: number) => {
      for (let i = 0; i < events; i++) {
        await producer.publish({
          key: newEventId(clock.now()),
          value: new TextEncoder().encode(String(i)),
        });
        clock.advanceSeconds(1);
      }
      await drain();
      let got: SqsMessage[] = [];
      for (let i = 0; i < 20 && handled < events; i++) {
        got = await receiveAll(env.sqs, queue.url);
        if (got.length === 0) continue;
        const response = await consumeSqsBatch(
          sqsEventOf(got, queue.arn),
          async (m) => {
            await broker.handleBroadcast({
              stream: `lifecycle/${m.id}`,
              data: JSON.stringify({ n: m.offset.toString() }),
              meta: { sourceOffset: m.offset.toString() },
            });
            await broker.commitSession(m.id, {
              toCacheEntry: () => new TextEncoder().encode(m.id),
            });
            await broker.finishSession(m.id);
            handled++;
          },
          { group: 'work', ackStore: acks, logger: quiet, now: () => clock.now() },
        );
        expect(response.batchItemFailures).toEqual([]);
        for (const m of got) {
          await env.sqs.send(
            new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: m.ReceiptHandle }),
          );
        }
      }
      expect(handled).toBe(events);
      handled = 0;
    };

    /** Every page of a consistent scan of `table` with `input`. */
    const scan = async (
      table: string,
      input: Omit<ScanCommandInput, 'TableName'>,
      onPage: (page: ScanCommandOutput) => void,
    ) => {
      let start: ScanCommandInput['ExclusiveStartKey'];
      do {
        const page = await env.dynamodb.send(
          new ScanCommand({
            TableName: table,
            ConsistentRead: true,
            ...input,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        onPage(page);
        start = page.LastEvaluatedKey;
      } while (start);
    };
    /** Items per table whose `expiresAt` is missing or after `at` (ms): what TTL keeps. */
    const left = async (at: number): Promise<Record<TableName, number>> => {
      const out = {} as Record<TableName, number>;
      for (const [name, table] of Object.entries(env.tables) as [TableName, string][]) {
        out[name] = 0;
        await scan(
          table,
          {
            FilterExpression: 'attribute_not_exists(expiresAt) OR expiresAt > :at',
            ExpressionAttributeValues: { ':at': { N: String(at / 1000) } },
            Select: 'COUNT',
          },
          (page) => {
            out[name] += page.Count ?? 0;
          },
        );
      }
      return out;
    };
    /** Every `expiresAt` written, as DynamoDB stores it, by table. */
    const ttlValues = async (): Promise<string[]> => {
      const out: string[] = [];
      for (const [name, table] of Object.entries(env.tables) as [TableName, string][]) {
        await scan(table, { ProjectionExpression: 'expiresAt' }, (page) => {
          for (const item of page.Items ?? []) {
            if (item.expiresAt?.N !== undefined) out.push(`${name}: ${item.expiresAt.N}`);
          }
        });
      }
      return out;
    };
    const total = (counts: Record<TableName, number>) =>
      Object.values(counts).reduce((a, b) => a + b, 0);

    // What the deploy stores before any event: the broadcast schemas, kept for good.
    const deployed = await left(clock.now() + 31 * DAY * 1000);
    expect(total(deployed)).toBe(deployed.schemas);

    const small = 20;
    await run(small);
    const now = await left(clock.now());
    // Before the TTLs: per event an outbox row, an ack item, a history message and meta item, a session.
    expect(now.acks).toBe(small);
    expect(now.outbox).toBe(small);
    expect(now.history).toBe(2 * small);
    expect(now.sessions).toBe(small);
    // TTL attributes are whole epoch seconds, as DynamoDB TTL expects.
    const ttls = await ttlValues();
    expect(ttls.length).toBeGreaterThanOrEqual(5 * small);
    expect(ttls.filter((v) => !/: \d+$/.test(v))).toEqual([]);
    const afterSmall = await left(clock.now() + 31 * DAY * 1000);

    const large = 60;
    await run(large);
    const afterLarge = await left(clock.now() + 31 * DAY * 1000);
    console.log(
      `items left after every TTL: ${total(afterSmall)} after ${small} events, ${total(afterLarge)} after ${small + large} (${(total(afterLarge) / (small + large)).toFixed(3)} per event)`,
      afterLarge,
    );
    expect(afterLarge).toEqual(afterSmall);
    expect(afterLarge).toEqual(deployed);
  }, 120_000);
});
