import { type AttributeValue, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { type ConsumedMessage, DynamoAckStore, OutboxProducer } from '../../lib/aws';
import { ackPartition, MAX_ENVELOPE_OFFSET } from '../../lib/core';
import { DEFAULT_MAX_HOLES } from '../../lib/messaging/ack-store';
import { testResources } from '../helpers/aws';
import { outboxPoller, receive, relayFor, renumbered } from '../helpers/relay';
import { invokeOnSqs } from '../helpers/sqs-lambda';

/** 39 nines: the highest 39-digit offset. */
const NINES_39 = 10n ** 39n - 1n;
/** 1 and 39 zeros: the lowest 40-digit offset, lower than {@link NINES_39} as text. */
const TEN_40 = 10n ** 39n;
const quiet = { error: () => {}, warn: () => {} };

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('offsets40', [
    { name: 'work', topics: ['jobs'], visibilityTimeout: 2, maxReceiveCount: 3 },
  ]);
  return shared;
};

async function store() {
  const env = await resources();
  const acks = new DynamoAckStore({ client: env.dynamodb, tableName: env.tables.acks });
  const raw = async (pk: string) =>
    (
      await env.dynamodb.send(
        new GetItemCommand({ TableName: env.tables.acks, Key: { pk: { S: pk } } }),
      )
    ).Item!;
  const putRaw = (item: Record<string, AttributeValue>) =>
    env.dynamodb.send(new PutItemCommand({ TableName: env.tables.acks, Item: item }));
  return { acks, raw, putRaw };
}

describe('DynamoAckStore with 40-digit offsets (DynamoDB Local)', () => {
  it('keeps 40-digit levels, floors and holes exactly', async () => {
    const { acks } = await store();
    const hole = TEN_40 + 7n;
    await acks.commit('g', 'exact', {
      level: MAX_ENVELOPE_OFFSET,
      open: [hole],
      floor: NINES_39,
      now: 1,
    });
    expect(await acks.loadState('g', 'exact')).toEqual({
      ackLevel: MAX_ENVELOPE_OFFSET,
      holes: new Map([[hole, 1]]),
      floor: NINES_39,
      version: 1,
    });
    expect(await acks.load('g', 'exact')).toBe(MAX_ENVELOPE_OFFSET);
  });

  it('holds DEFAULT_MAX_HOLES holes of 40 digits in one item (400 KB)', async () => {
    const { acks } = await store();
    const open = Array.from(
      { length: DEFAULT_MAX_HOLES },
      (_, i) => MAX_ENVELOPE_OFFSET - BigInt(i),
    );
    await acks.commit('g', 'full', { level: MAX_ENVELOPE_OFFSET, open, now: Date.now() });
    const state = await acks.loadState('g', 'full');
    expect(state?.holes.size).toBe(DEFAULT_MAX_HOLES);
    expect(state?.holes.has(MAX_ENVELOPE_OFFSET - BigInt(DEFAULT_MAX_HOLES - 1))).toBe(true);
  });

  it('only moves a level forward, comparing numbers across digit counts', async () => {
    const { acks } = await store();
    await acks.save('g', 'order', 9n);
    await acks.save('g', 'order', 10n);
    expect(await acks.load('g', 'order')).toBe(10n);
    await acks.save('g', 'order', NINES_39);
    await acks.save('g', 'order', TEN_40);
    await acks.save('g', 'order', NINES_39);
    expect(await acks.load('g', 'order')).toBe(TEN_40);
    await Promise.all(
      [TEN_40 + 5n, NINES_39, MAX_ENVELOPE_OFFSET, 10n ** 38n].map((l) =>
        acks.save('g', 'order', l),
      ),
    );
    expect(await acks.load('g', 'order')).toBe(MAX_ENVELOPE_OFFSET);
    // The initial level of the AckManager contract is stored too, and is lower than 0.
    await acks.save('g', 'initial', -1n);
    expect(await acks.load('g', 'initial')).toBe(-1n);
    await acks.save('g', 'initial', 0n);
    expect(await acks.load('g', 'initial')).toBe(0n);
  });
});

describe('DynamoAckStore on an item an older release wrote with numbers (N)', () => {
  it('reads it, and a commit rewrites its offsets in the 40-digit form', async () => {
    const { acks, raw, putRaw } = await store();
    await putRaw({
      pk: { S: 'g#old' },
      ackLevel: { N: '17' },
      holes: { M: { '12': { N: '5' } } },
      floor: { N: '3' },
      version: { N: '2' },
      expiresAt: { N: String(Math.floor(Date.now() / 1000) + 3600) },
    });
    expect(await acks.loadState('g', 'old')).toEqual({
      ackLevel: 17n,
      holes: new Map([[12n, 5]]),
      floor: 3n,
      version: 2,
    });
    await acks.save('g', 'old', 5n);
    expect(await acks.load('g', 'old')).toBe(17n);
    const next = await acks.commit('g', 'old', { level: TEN_40 + 3n, close: [12n], now: 6 });
    expect(next).toEqual({ ackLevel: TEN_40 + 3n, holes: new Map(), floor: 3n, version: 3 });
    expect(await acks.loadState('g', 'old')).toEqual(next);
    const item = await raw('g#old');
    expect([item.ackLevel?.N, item.floor?.N]).toEqual([undefined, undefined]);
    expect([typeof item.ackLevel?.S, typeof item.floor?.S]).toEqual(['string', 'string']);
  });

  it('raises a level stored as a number: compared as a number, or lower than any longer one', async () => {
    const { acks, raw, putRaw } = await store();
    // What `save` of an older release wrote: a level and no version.
    await putRaw({ pk: { S: 'g#old-save' }, ackLevel: { N: '17' } });
    await acks.save('g', 'old-save', 16n);
    expect(await acks.load('g', 'old-save')).toBe(17n);
    await acks.save('g', 'old-save', 20n);
    expect(await acks.load('g', 'old-save')).toBe(20n);
    expect((await raw('g#old-save')).ackLevel?.N).toBeUndefined();
    await acks.save('g', 'old-save', 18n);
    expect(await acks.load('g', 'old-save')).toBe(20n);

    // A number holds 38 significant digits: 38 nines and a 0 is one, 10^39 another.
    const stored = (10n ** 38n - 1n) * 10n;
    await putRaw({ pk: { S: 'g#old-39' }, ackLevel: { N: stored.toString() } });
    await acks.save('g', 'old-39', stored - 1n);
    expect(await acks.load('g', 'old-39')).toBe(stored);
    await acks.save('g', 'old-39', stored + 5n);
    expect(await acks.load('g', 'old-39')).toBe(stored + 5n);
    await putRaw({ pk: { S: 'g#old-40' }, ackLevel: { N: TEN_40.toString() } });
    await acks.save('g', 'old-40', NINES_39);
    expect(await acks.load('g', 'old-40')).toBe(TEN_40);
    await acks.save('g', 'old-40', TEN_40 + 1n);
    expect(await acks.load('g', 'old-40')).toBe(TEN_40 + 1n);

    await putRaw({ pk: { S: 'g#old-commit' }, ackLevel: { N: '17' } });
    const state = await acks.commit('g', 'old-commit', { level: NINES_39, open: [18n], now: 1 });
    expect(state).toEqual({ ackLevel: NINES_39, holes: new Map([[18n, 1]]), version: 1 });
    expect(await acks.loadState('g', 'old-commit')).toEqual(state);
  });
});

describe('40-digit stream sequence numbers from the relay to the ack store', () => {
  it('carries them as offsets through SQS to the consumer, its holes and its level, exactly', async () => {
    const env = await resources();
    const { acks } = await store();
    const producer = new OutboxProducer({
      client: env.dynamodb,
      tableName: env.tables.outbox,
      topic: 'jobs',
    });
    // One at a time: commit order is stream order.
    for (let i = 0; i < 6; i++) {
      await producer.publish({ key: 'k', value: new TextEncoder().encode(`v${i}`) });
    }
    await producer.close();
    // The stream's order kept, its numbers made as long as AWS's: two of 39 digits, then
    // 40 digits from 1000… (lower than 999… as text) up to just below the largest.
    const given: bigint[] = [];
    const { drain } = outboxPoller(
      env.outboxStreamArn!,
      renumbered(relayFor(env.sqs, { jobs: [env.queues.work!.url] }), (seq, i) => {
        const local = BigInt(seq);
        expect(local < 10n ** 30n).toBe(true);
        const offset =
          i < 2
            ? NINES_39 - 10n ** 30n + local
            : i < 4
              ? TEN_40 + local
              : 10n ** 40n - 10n ** 30n + local;
        given.push(offset);
        return offset.toString();
      }),
    );
    await drain();
    expect(given.map((o) => o.toString().length)).toEqual([39, 39, 40, 40, 40, 40]);

    const calls: { value: string; offset: bigint; ok: boolean }[] = [];
    const handler = async (m: ConsumedMessage) => {
      const value = new TextDecoder().decode(m.value);
      const ok = value !== 'v3' || calls.some((c) => c.value === 'v3');
      calls.push({ value, offset: m.offset, ok });
      if (!ok) throw new Error('v3 fails once');
    };
    const queue = env.queues.work!;
    const options = {
      group: 'work',
      ackStore: acks,
      logger: quiet,
      visibility: { sqs: env.sqs, queueUrl: () => queue.url, backoffSeconds: () => 0 },
    };
    const partition = ackPartition('jobs', 'k');
    const bodies: string[] = [];
    const invoke = async () => {
      const run = await invokeOnSqs(env.sqs, queue, handler, options);
      bodies.push(...run.messages.map((m) => m.Body!));
      return run;
    };

    const until = async (done: () => boolean) => {
      const deadline = Date.now() + 10_000;
      while (!done() && Date.now() < deadline) {
        if ((await invoke()).received === 0) await new Promise((r) => setTimeout(r, 50));
      }
    };

    await until(() => calls.some((c) => !c.ok));
    // v3 failed: its 40-digit offset is a hole under the level.
    const failed = await acks.loadState('work', partition);
    expect(failed?.holes.has(given[3]!)).toBe(true);
    expect(failed?.floor).toBe(given[0]);

    await until(() => calls.filter((c) => c.ok).length === 6);
    expect(calls.filter((c) => c.ok).map((c) => c.offset)).toEqual(given);
    expect(calls.filter((c) => !c.ok).map((c) => c.offset)).toEqual([given[3]]);
    expect(await acks.loadState('work', partition)).toMatchObject({
      ackLevel: given[5],
      holes: new Map(),
      floor: given[0],
    });

    // A copy of a handled 39-digit message (a redrive, a resend): acked unhandled.
    const handled = calls.length;
    const v1 = bodies.find((b) => JSON.parse(b).offset === given[1]!.toString());
    await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: queue.url,
        MessageBody: v1,
        MessageGroupId: 'k',
        MessageDeduplicationId: `again-${Date.now()}`,
      }),
    );
    expect(await invoke()).toMatchObject({ received: 1, failed: 0 });
    expect(calls).toHaveLength(handled);
    expect(await receive(env.sqs, queue.url)).toEqual([]);
    expect(await receive(env.sqs, queue.dlqUrl)).toEqual([]);
  });
});
