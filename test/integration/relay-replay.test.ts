import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { DeleteItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import {
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
  type Message as SqsMessage,
} from '@aws-sdk/client-sqs';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, inject, it } from 'vitest';
import { sqsEventOf } from '../../infra/local/pollers/sqs';
import { sendToRelayFailures } from '../../infra/local/relay-failures';
import {
  type ConsumedMessage,
  consumeSqsBatch,
  OutboxProducer,
  parseRelayFailure,
  type RelayReplayOptions,
  replayRelayFailures,
} from '../../lib/aws';
import { ackPartition, BROADCAST_TOPIC, decodeEnvelope } from '../../lib/core';
import { MemoryAckStore } from '../../lib/testing';
import { testResources } from '../helpers/aws';
import { outboxPoller, receiveAll, relayFor } from '../helpers/relay';

type Env = Awaited<ReturnType<typeof testResources>>;

const groups = [
  { name: 'billing', topics: ['orders'] },
  { name: 'audit', topics: ['orders'] },
];

function streamsClient(): DynamoDBStreamsClient {
  return new DynamoDBStreamsClient({
    endpoint: inject('dynamodbEndpoint'),
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
}

/** Publishes `n` events through the outbox, keys in turn; returns their ids in commit order. */
async function publish(env: Env, topic: string, n: number, keys: readonly string[]) {
  const producer = new OutboxProducer({
    client: env.dynamodb,
    tableName: env.tables.outbox,
    topic,
  });
  const ids: { id: string; key: string }[] = [];
  for (let i = 0; i < n; i++) {
    const key = keys[i % keys.length]!;
    const id = `e-${String(i).padStart(3, '0')}-${Date.now().toString(36)}`;
    // One at a time: commit order is stream order, per key and overall.
    await producer.publish({ key, value: new TextEncoder().encode(`v${i}`), id });
    ids.push({ id, key });
  }
  await producer.close();
  return ids;
}

/**
 * An SQS client whose `SendMessageBatch` to `queueUrl` fails (throws, as SQS does when it is
 * down) while `broken()`, after letting the first `allowed` calls through: a fault the
 * emulator cannot produce.
 */
function failingTo(sqs: SQSClient, queueUrl: string, allowed: number, broken: () => boolean) {
  let calls = 0;
  return {
    send: async (command: unknown) => {
      if (command instanceof SendMessageBatchCommand && command.input.QueueUrl === queueUrl) {
        calls++;
        if (calls > allowed && broken()) throw new Error('injected: SQS unavailable');
      }
      return sqs.send(command as never);
    },
  } as unknown as SQSClient;
}

/**
 * Relays the outbox stream with `relay` until it gives a batch up (2 retries), which goes to
 * the relay failures queue as Lambda's on-failure destination would send it. Returns the
 * sequence number of every event id the stream carried, and the failure records sent.
 */
async function relayUntilGivenUp(env: Env, relay: ReturnType<typeof relayFor>) {
  const sequenceOf = new Map<string, string>();
  const bodies: string[] = [];
  const recording = {
    send: (command: unknown) => {
      if (command instanceof SendMessageCommand) bodies.push(command.input.MessageBody ?? '');
      return env.sqs.send(command as never);
    },
  } as unknown as SQSClient;
  const { drain } = outboxPoller(
    env.outboxStreamArn!,
    {
      relay: (records: DynamoDBRecord[]) => {
        for (const r of records) {
          const id = r.dynamodb?.NewImage?.sk?.S;
          if (id) sequenceOf.set(id, r.dynamodb!.SequenceNumber!);
        }
        return relay.relay(records);
      },
    },
    {
      maxRetryAttempts: 2,
      onFailure: sendToRelayFailures({
        sqs: recording,
        queueUrl: env.relayFailuresUrl!,
        streamArn: env.outboxStreamArn!,
        functionName: 'test-outboxRelay',
      }),
    },
  );
  await drain();
  return { sequenceOf, bodies, drain };
}

function replayOptions(env: Env, routes: Record<string, string[]>): RelayReplayOptions {
  return {
    streams: streamsClient(),
    dynamodb: env.dynamodb,
    outboxTable: env.tables.outbox,
    relay: relayFor(env.sqs, routes),
  };
}

const delivered = (messages: SqsMessage[]) =>
  messages.map((m) => {
    const e = decodeEnvelope(m.Body!);
    return { id: e.id, key: e.key, offset: e.offset, dedup: m.Attributes?.MessageDeduplicationId };
  });

describe('replaying relay failures (DynamoDB Local + fauxqs)', () => {
  it('relays again every event of a batch the relay gave up on: each once, in key order, with its offset', async () => {
    const env = await testResources('replay', groups);
    const billing = env.queues.billing!.url;
    const audit = env.queues.audit!.url;
    const routes = { orders: [billing, audit] };
    const events = await publish(env, 'orders', 12, ['a', 'b', 'c']);

    // SQS refuses the audit queue after its first batch: the relay fails past its retries.
    let broken = true;
    const relay = relayFor(
      failingTo(env.sqs, audit, 1, () => broken),
      routes,
    );
    const { sequenceOf, bodies } = await relayUntilGivenUp(env, relay);
    const firstAudit = await receiveAll(env.sqs, audit);
    const firstBilling = await receiveAll(env.sqs, billing);
    // The first batch (one event per key) reached audit; billing got everything.
    expect(delivered(firstAudit).map((d) => d.id)).toEqual(events.slice(0, 3).map((e) => e.id));
    expect(firstBilling).toHaveLength(12);

    // The record Lambda's on-failure destination gets: metadata of the given-up range only.
    expect(bodies).toHaveLength(1);
    const failure = parseRelayFailure(bodies[0]!);
    expect(failure).toMatchObject({
      condition: 'RetryAttemptsExhausted',
      startSequenceNumber: sequenceOf.get(events[3]!.id),
      endSequenceNumber: sequenceOf.get(events[11]!.id),
      batchSize: 9,
      streamArn: env.outboxStreamArn,
    });
    expect(failure.shardId).toMatch(/^shardId-/);
    expect(JSON.parse(bodies[0]!).requestContext.approximateInvokeCount).toBe(3);

    broken = false; // SQS is back
    const reports = await replayRelayFailures({
      ...replayOptions(env, routes),
      sqs: env.sqs,
      queueUrl: env.relayFailuresUrl!,
    });
    expect(reports.map((r) => [r.outcome, r.detail])).toEqual([['replayed', undefined]]);
    expect(reports[0]!.replayed).toEqual(
      events.slice(3).map((e) => ({
        id: e.id,
        topic: 'orders',
        key: e.key,
        sequenceNumber: sequenceOf.get(e.id),
      })),
    );
    expect(reports[0]!.missing).toEqual([]);
    // Done with: the record left the queue.
    expect(await receiveAll(env.sqs, env.relayFailuresUrl!)).toEqual([]);

    const all = delivered([...firstAudit, ...(await receiveAll(env.sqs, audit))]);
    // Every event once, with its id as dedup id and its stream sequence number as offset.
    expect(all.map((d) => d.id).sort()).toEqual(events.map((e) => e.id).sort());
    for (const d of all) {
      expect(d.dedup).toBe(d.id);
      expect(d.offset).toBe(BigInt(sequenceOf.get(d.id)!));
    }
    for (const key of ['a', 'b', 'c']) {
      expect(all.filter((d) => d.key === key).map((d) => d.id)).toEqual(
        events.filter((e) => e.key === key).map((e) => e.id),
      );
    }
    // Billing had them all: the replay's copies were dropped as duplicates (same id).
    expect(await receiveAll(env.sqs, billing)).toEqual([]);

    // The same record replayed again delivers nothing new.
    await env.sqs.send(
      new SendMessageCommand({ QueueUrl: env.relayFailuresUrl!, MessageBody: bodies[0]! }),
    );
    const again = await replayRelayFailures({
      ...replayOptions(env, routes),
      sqs: env.sqs,
      queueUrl: env.relayFailuresUrl!,
    });
    expect(again.map((r) => [r.outcome, r.replayed.length])).toEqual([['replayed', 9]]);
    expect(await receiveAll(env.sqs, audit)).toEqual([]);
    expect(await receiveAll(env.sqs, billing)).toEqual([]);
  });

  it('keeps a record whose events it cannot all relay: an item gone from the outbox, a range the stream no longer holds, a malformed body', async () => {
    const env = await testResources('replay-keep', groups);
    const audit = env.queues.audit!.url;
    const routes = { orders: [audit] };
    const events = await publish(env, 'orders', 3, ['k']);
    const { bodies } = await relayUntilGivenUp(
      env,
      relayFor(
        failingTo(env.sqs, audit, 0, () => true),
        routes,
      ),
    );
    expect(bodies).toHaveLength(1);
    await env.dynamodb.send(
      new DeleteItemCommand({
        TableName: env.tables.outbox,
        Key: { pk: { S: 'orders#k' }, sk: { S: events[1]!.id } },
      }),
    );
    const failure = JSON.parse(bodies[0]!);
    const trimmed = {
      ...failure,
      DDBStreamBatchInfo: {
        ...failure.DDBStreamBatchInfo,
        shardId: 'shardId-00000000000000000000-0000dead',
      },
    };
    for (const body of [JSON.stringify(trimmed), '{"requestContext":{}}']) {
      await env.sqs.send(
        new SendMessageCommand({ QueueUrl: env.relayFailuresUrl!, MessageBody: body }),
      );
    }

    const reports = await replayRelayFailures({
      ...replayOptions(env, routes),
      sqs: env.sqs,
      queueUrl: env.relayFailuresUrl!,
    });
    const by = (outcome: string) => reports.filter((r) => r.outcome === outcome);
    expect(reports.map((r) => r.outcome).sort()).toEqual(['incomplete', 'malformed', 'trimmed']);
    const incomplete = by('incomplete')[0]!;
    expect(incomplete.missing.map((m) => m.sk)).toEqual([events[1]!.id]);
    expect(incomplete.detail).toMatch(/1 event\(s\) missing from the outbox/);
    // What it could send, it sent (in order, up to nothing it had to skip): the others.
    expect(incomplete.replayed.map((e) => e.id)).toEqual([events[0]!.id, events[2]!.id]);
    expect(by('trimmed')[0]!.detail).toMatch(/no longer holds/);
    // Nothing was deleted: all three records are back in the queue for a later run.
    const left = await receiveAll(env.sqs, env.relayFailuresUrl!);
    expect(left).toHaveLength(3);
  });
});

describe('replay and a consumer with an ack store', () => {
  it('hands a consumer with an ack store a replayed event whose key went on (below its ack level, no hole), and changes no ack state', async () => {
    const env = await testResources('replay-acks', [{ name: 'audit', topics: ['orders'] }]);
    const audit = env.queues.audit!;
    const routes = { orders: [audit.url] };
    const acks = new MemoryAckStore();
    const handled: string[] = [];
    const replayedFlags: boolean[] = [];
    const consume = async () => {
      const got = await receiveAll(env.sqs, audit.url);
      const handler = async (m: ConsumedMessage) => {
        handled.push(m.id);
        replayedFlags.push(m.replayed);
      };
      await consumeSqsBatch(sqsEventOf(got, audit.arn), handler, {
        group: 'audit',
        ackStore: acks,
        logger: { error: () => {}, warn: () => {} },
      });
      return got.length;
    };
    // The key has ack state before the relay fails: its first event was handled.
    let broken = false;
    const [zero] = await publish(env, 'orders', 1, ['k']);
    const { drain, sequenceOf } = await relayUntilGivenUp(
      env,
      relayFor(
        failingTo(env.sqs, audit.url, 0, () => broken),
        routes,
      ),
    );
    expect(await consume()).toBe(1);
    // Then the relay fails past its retries on the next event, and gives it up.
    broken = true;
    const [first] = await publish(env, 'orders', 1, ['k']);
    await drain();
    broken = false;
    // The shard went on: the key's next event is relayed and handled first.
    const [later] = await publish(env, 'orders', 1, ['k']);
    await drain();
    expect(await consume()).toBe(1);
    expect(handled).toEqual([zero!.id, later!.id]);
    const partition = ackPartition('orders', 'k');
    const before = await acks.loadState('audit', partition);
    expect(before?.ackLevel).toBe(BigInt(sequenceOf.get(later!.id)!));
    expect(before?.floor).toBe(BigInt(sequenceOf.get(zero!.id)!));

    const reports = await replayRelayFailures({
      ...replayOptions(env, routes),
      sqs: env.sqs,
      queueUrl: env.relayFailuresUrl!,
    });
    expect(reports.map((r) => r.replayed.map((e) => e.id))).toEqual([[first!.id]]);
    // Its offset is inside what the ack state counts as done: above the floor, below the
    // level, and no hole (it was never received).
    const offset = BigInt(sequenceOf.get(first!.id)!);
    expect(offset).toBeLessThan(before!.ackLevel);
    expect(offset).toBeGreaterThan(before!.floor!);
    // Delivered and handled (at least once: docs/consumers.md, "Replaying relay failures"); the ack
    // state is not written.
    expect(await consume()).toBe(1);
    expect(handled).toEqual([zero!.id, later!.id, first!.id]);
    expect(replayedFlags).toEqual([false, false, true]);
    expect(await acks.loadState('audit', partition)).toEqual(before);
  });
});

const root = join(import.meta.dirname, '..', '..');
const tsxCli = join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs');

/** Runs `npm run relay:replay -- args` (its script, with tsx) against the emulators. */
function relayReplay(args: readonly string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [tsxCli, join(root, 'infra', 'ops', 'relay-replay.ts'), ...args],
      {
        cwd: root,
        // The default credential chain, as on AWS.
        env: {
          ...process.env,
          AWS_ACCESS_KEY_ID: 'local',
          AWS_SECRET_ACCESS_KEY: 'local',
          AWS_REGION: 'us-east-1',
        },
        timeout: 60_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: stdout + stderr });
      },
    );
  });
}

describe('npm run relay:replay', () => {
  it('replays the records of <prefix>-relay-failures into the deployed groups, then finds none', async () => {
    const env = await testResources('replay-cli');
    const queue = env.queues.broadcast!.url;
    const events = await publish(env, BROADCAST_TOPIC, 4, ['s1', 's2']);
    const { sequenceOf, bodies } = await relayUntilGivenUp(
      env,
      relayFor(
        failingTo(env.sqs, queue, 0, () => true),
        { [BROADCAST_TOPIC]: [queue] },
      ),
    );
    expect(bodies).toHaveLength(1);
    const endpoints = [
      '--prefix',
      env.prefix,
      '--dynamodb-endpoint',
      inject('dynamodbEndpoint'),
      '--sqs-endpoint',
      inject('sqsEndpoint'),
    ];

    const dry = await relayReplay([...endpoints, '--dry-run']);
    expect(dry.stdout).toMatch(
      /would replay shardId-\S+ \d+\.\.\d+ \(RetryAttemptsExhausted, 4 records/,
    );
    expect(dry.code).toBe(0);
    expect(await receiveAll(env.sqs, queue)).toEqual([]);

    const run = await relayReplay(endpoints);
    expect(run.stdout).toMatch(/replayed shardId-\S+ .*: 4 event\(s\)/);
    for (const e of events) {
      expect(run.stdout).toContain(
        `${e.id} topic ${BROADCAST_TOPIC} key ${e.key} offset ${sequenceOf.get(e.id)}`,
      );
    }
    expect(run.stdout).toMatch(/1 record\(s\): 1 replayed, 0 kept; 4 event\(s\) relayed/);
    expect(run.code).toBe(0);
    const got = delivered(await receiveAll(env.sqs, queue));
    expect(got.map((d) => [d.id, d.offset])).toEqual(
      events.map((e) => [e.id, BigInt(sequenceOf.get(e.id)!)]),
    );

    const none = await relayReplay(endpoints);
    expect(none.stdout).toMatch(/0 record\(s\): 0 replayed, 0 kept; 0 event\(s\) relayed/);
    expect(none.code).toBe(0);
  });
});
