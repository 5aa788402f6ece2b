import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBRecord } from 'aws-lambda';
import { StreamPoller } from '../infra/local/pollers/stream';
import { createLocalResources } from '../infra/local/resources';
import {
  LOCAL_CREDENTIALS,
  LOCAL_REGION,
  type LocalService,
  startDynamoDBLocal,
  startSqsLocal,
} from '../infra/local/services';
import { recordFromItem } from '../lib/adapters/aws/dynamodb/outbox';
import { OutboxProducer, OutboxRelay } from '../lib/aws';
import { encodeEnvelope } from '../lib/core';
import { type BenchResult, measureAsync } from './util';

const EVENTS = 5_000;
const KEYS = 100;
/** Records per relay call: the stream event source mapping's batch size. */
const LAMBDA_BATCH = 100;
const TOPIC = 'bench';
const PAYLOAD_BYTES = 256;

/** Counts the HTTP requests a client sends, retries included. */
class RequestCounter {
  total = 0;
  readonly byCommand = new Map<string, number>();

  reset(): void {
    this.total = 0;
    this.byCommand.clear();
  }

  /** E.g. `500 SendMessageBatch`. */
  describe(): string {
    return [...this.byCommand]
      .map(([name, n]) => `${n} ${name.replace(/Command$/, '')}`)
      .join(', ');
  }
}

function countRequests(client: SQSClient): RequestCounter {
  const counter = new RequestCounter();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      counter.total++;
      const name = context.commandName ?? 'unknown';
      counter.byCommand.set(name, (counter.byCommand.get(name) ?? 0) + 1);
      return next(args);
    },
    // Below the retry middleware (finalizeRequest, high), so every attempt is one request.
    { step: 'finalizeRequest', priority: 'low', name: 'benchRequestCounter' },
  );
  return counter;
}

function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS });
}

/** The baseline: one `SendMessage` per event, in stream order, the relay's message shape. */
async function sendOneByOne(
  sqs: SQSClient,
  queueUrl: string,
  records: readonly DynamoDBRecord[],
): Promise<number> {
  let sent = 0;
  for (const r of records) {
    if (r.eventName !== 'INSERT' || !r.dynamodb?.NewImage) continue;
    const record = recordFromItem(r.dynamodb.NewImage as Record<string, AttributeValue>);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: encodeEnvelope(record, BigInt(r.dynamodb.SequenceNumber ?? '0')),
        MessageGroupId: record.key,
        MessageDeduplicationId: record.id,
      }),
    );
    sent++;
  }
  return sent;
}

async function queueDepth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages'],
    }),
  );
  return Number(out.Attributes?.ApproximateNumberOfMessages ?? Number.NaN);
}

async function expectDepth(sqs: SQSClient, queueUrl: string, variant: string): Promise<number> {
  const depth = await queueDepth(sqs, queueUrl);
  if (depth !== EVENTS) {
    throw new Error(`relay bench (${variant}): queue holds ${depth} messages, expected ${EVENTS}`);
  }
  return depth;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Writes the events to the outbox and reads the whole stream into memory, once. */
async function streamRecords(
  dynamodb: DynamoDBClient,
  streams: DynamoDBStreamsClient,
  tableName: string,
  streamArn: string,
): Promise<DynamoDBRecord[]> {
  const producer = new OutboxProducer({ client: dynamodb, tableName, topic: TOPIC });
  const payload = new Uint8Array(PAYLOAD_BYTES).map((_, i) => i % 251);
  // Keys round-robin, so a 100-record stream batch spans 100 groups and SendMessageBatch fills.
  await Promise.all(
    Array.from({ length: EVENTS }, (_, i) =>
      producer.publish({ key: `key-${i % KEYS}`, value: payload, type: 'BenchEvent' }),
    ),
  );
  await producer.close();

  const records: DynamoDBRecord[] = [];
  const poller = new StreamPoller({
    streams,
    streamArn,
    batchSize: 1000,
    handler: async (batch) => {
      records.push(...batch);
      return { batchItemFailures: [] };
    },
  });
  for (let polls = 0; records.length < EVENTS; polls++) {
    if (polls > 1_000) throw new Error(`relay bench: stream gave ${records.length}/${EVENTS}`);
    if ((await poller.pollOnce()) === 0) await new Promise((r) => setTimeout(r, 50));
  }
  const inserts = records.filter((r) => r.eventName === 'INSERT').length;
  if (inserts !== EVENTS) {
    throw new Error(`relay bench: stream holds ${inserts} inserts, expected ${EVENTS}`);
  }
  return records;
}

/**
 * Outbox relay throughput on the local services: the same 5,000 stream records relayed
 * (a) by OutboxRelay in Lambda-sized batches (SendMessageBatch) and (b) with one SendMessage
 * per event, each to its own fresh FIFO queue, counting HTTP requests with SDK middleware.
 */
export async function benchRelay(): Promise<BenchResult[]> {
  const started: LocalService[] = [];
  const clients: { destroy(): void }[] = [];
  const track = (service: LocalService): LocalService => {
    started.push(service);
    return service;
  };
  try {
    const [ddbLocal, sqsLocal] = await Promise.all([
      startDynamoDBLocal().then(track),
      startSqsLocal().then(track),
    ]);
    const dynamodb = new DynamoDBClient({
      endpoint: ddbLocal.endpoint,
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
    });
    const streams = new DynamoDBStreamsClient({
      endpoint: ddbLocal.endpoint,
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
    });
    const admin = sqsClient(sqsLocal.endpoint);
    // One client per variant, so each counter sees only its variant's requests.
    const batchedSqs = sqsClient(sqsLocal.endpoint);
    const singleSqs = sqsClient(sqsLocal.endpoint);
    clients.push(dynamodb, streams, admin, batchedSqs, singleSqs);
    const batchedCount = countRequests(batchedSqs);
    const singleCount = countRequests(singleSqs);

    const res = await createLocalResources({
      dynamodb,
      sqs: admin,
      prefix: 'bench',
      consumerGroups: [
        { name: 'relay-batched', topics: [TOPIC] },
        { name: 'relay-single', topics: [TOPIC] },
      ],
    });
    const batchedUrl = res.queues['relay-batched']!.url;
    const singleUrl = res.queues['relay-single']!.url;
    if (!res.outboxStreamArn) throw new Error('relay bench: the outbox table has no stream');

    const records = await streamRecords(dynamodb, streams, res.tables.outbox, res.outboxStreamArn);
    const lambdaBatches = chunks(records, LAMBDA_BATCH);

    // Warm both clients up (connection, endpoint, signer) outside the timed runs.
    await queueDepth(batchedSqs, batchedUrl);
    await queueDepth(singleSqs, singleUrl);

    const relay = new OutboxRelay({ sqs: batchedSqs, routes: { [TOPIC]: [batchedUrl] } });
    batchedCount.reset();
    let relayed = 0;
    const batched = await measureAsync(
      `OutboxRelay, ${EVENTS} events, ${LAMBDA_BATCH}/call, ${KEYS} keys`,
      EVENTS,
      async () => {
        for (const batch of lambdaBatches) {
          const out = await relay.relay(batch);
          if (out.batchItemFailures.length > 0 || out.refused > 0) {
            throw new Error(`relay bench: relay failed: ${JSON.stringify(out)}`);
          }
          relayed += out.sent;
        }
      },
    );
    const batchedRequests = batchedCount.total;
    const batchedCommands = batchedCount.describe();
    if (relayed !== EVENTS) throw new Error(`relay bench: relayed ${relayed}/${EVENTS}`);
    const batchedDepth = await expectDepth(admin, batchedUrl, 'batched');

    singleCount.reset();
    let sentSingly = 0;
    const single = await measureAsync(
      `One SendMessage per event, ${EVENTS} events, same records`,
      EVENTS,
      async () => {
        for (const batch of lambdaBatches)
          sentSingly += await sendOneByOne(singleSqs, singleUrl, batch);
      },
    );
    const singleRequests = singleCount.total;
    const singleCommands = singleCount.describe();
    if (sentSingly !== EVENTS) throw new Error(`relay bench: sent ${sentSingly}/${EVENTS}`);
    const singleDepth = await expectDepth(admin, singleUrl, 'single');

    const perEvent = (n: number) => (n / EVENTS).toFixed(3);
    return [
      {
        ...batched,
        ratio: `${(batched.opsPerSec / single.opsPerSec).toFixed(2)}x single`,
        extra: `${perEvent(batchedRequests)} req/event (${batchedCommands}), queue holds ${batchedDepth}`,
      },
      {
        ...single,
        extra: `${perEvent(singleRequests)} req/event (${singleCommands}), queue holds ${singleDepth}`,
      },
    ];
  } finally {
    for (const c of clients) c.destroy();
    await Promise.allSettled(started.map((s) => s.stop()));
  }
}
