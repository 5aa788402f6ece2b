import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AvroCodec,
  createEventSender,
  EventSenderError,
  EventTopics,
  NoopEventSender,
  type OutgoingMessage,
  type Producer,
  UnknownEventTypeError,
  withKey,
} from '../../lib/core';
import {
  MemoryClient,
  MemoryOutbox,
  MemorySchemaRegistry,
  type MemoryTransaction,
} from '../../lib/testing';
import { FakeClock } from '../helpers/clock';
import { OrderPlaced, orderPlaced, testTopics, UserSignedUp } from '../helpers/events';

function setup() {
  const client = new MemoryClient({
    applications: { shop: { topic: 'orders', consumers: ['billing'] } },
  });
  const producer = client.newProducer('shop');
  const registry = new MemorySchemaRegistry();
  return { client, producer, registry, queue: client.queue('orders', 'billing') };
}

/** A producer that records what it gets and can be held back. */
class RecordingProducer implements Producer {
  readonly published: { message: OutgoingMessage; topic: string | undefined }[] = [];
  gate: Promise<void> = Promise.resolve();
  async publish(message: OutgoingMessage, opts?: { topic?: string }): Promise<void> {
    await this.gate;
    this.published.push({ message, topic: opts?.topic });
  }
}

describe('createEventSender', () => {
  it('registers every event type once on initialize', async () => {
    const registry = new MemorySchemaRegistry();
    await createEventSender({ topics: testTopics(), registry }).initialize();
    const first = await registry.getById(1);
    const second = await registry.getById(2);
    expect([first, second].map((s) => (s as { name: string }).name).sort()).toEqual([
      'auth.UserSignedUp',
      'shop.OrderPlaced',
    ]);
    expect(await registry.getById(3)).toBeUndefined();
  });

  it('throws on a second initialize', async () => {
    const init = createEventSender({ topics: testTopics(), registry: new MemorySchemaRegistry() });
    await init.initialize();
    await expect(init.initialize()).rejects.toThrow(EventSenderError);
  });
});

describe('EventSender.sendAsync', () => {
  it('hands events to the producer with topic, key, type and framed payload', async () => {
    const { registry } = setup();
    const producer = new RecordingProducer();
    const sender = await createEventSender({
      topics: testTopics(),
      registry,
      producer,
    }).initialize();
    sender.sendAsync(withKey(orderPlaced('o-9', 3), 'k-1', { key: 'h', value: 'v' }));
    await sender.close();
    expect(producer.published).toHaveLength(1);
    const { message, topic } = producer.published[0]!;
    expect(topic).toBe('orders');
    expect(message).toMatchObject({ key: 'k-1', type: 'shop.OrderPlaced', headers: { h: 'v' } });
    expect(message.id).toMatch(/^[0-9a-f]{28}$/);
    expect(await new AvroCodec(registry).decode(message.value, OrderPlaced)).toEqual({
      orderId: 'o-9',
      amount: 3,
    });
    expect(sender.stats()).toMatchObject({ sent: 1, dropped: 0, failed: 0, buffered: 0 });
  });

  it('uses the event id as key when neither event nor type has one', async () => {
    const producer = new RecordingProducer();
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer,
    }).initialize();
    sender.sendAsync(UserSignedUp.of({ email: 'a@b' }));
    await sender.close();
    const { message } = producer.published[0]!;
    expect(message.key).toBe(message.id);
  });

  it('drops and counts events when the buffer is full, and never throws', async () => {
    const producer = new RecordingProducer();
    let release!: () => void;
    producer.gate = new Promise((r) => {
      release = r;
    });
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer,
      bufferSize: 3,
    }).initialize();
    for (let i = 0; i < 5; i++) sender.sendAsync(orderPlaced(`o-${i}`));
    expect(sender.stats()).toMatchObject({ buffered: 3, dropped: 2 });
    release();
    await sender.close();
    expect(producer.published.map((p) => p.message.key)).toEqual(['o-0', 'o-1', 'o-2']);
    expect(sender.stats()).toMatchObject({ sent: 3, dropped: 2, buffered: 0 });
  });

  it('counts an unregistered event type as failed without throwing', async () => {
    const errors: unknown[] = [];
    const sender = await createEventSender({
      topics: new EventTopics().register(OrderPlaced),
      registry: new MemorySchemaRegistry(),
      producer: new RecordingProducer(),
      onError: (e) => errors.push(e),
    }).initialize();
    expect(() => sender.sendAsync(UserSignedUp.of({ email: 'x' }))).not.toThrow();
    await sender.close();
    expect(sender.stats().failed).toBe(1);
    expect(errors[0]).toBeInstanceOf(UnknownEventTypeError);
  });

  it('counts a producer failure as failed and goes on', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer: {
        publish: async () => {
          calls++;
          if (calls === 1) throw new Error('boom');
        },
      },
      onError: (e) => errors.push(e),
    }).initialize();
    sender.sendAsync(orderPlaced('a'));
    sender.sendAsync(orderPlaced('b'));
    await sender.close();
    expect(sender.stats()).toMatchObject({ sent: 1, failed: 1 });
    expect((errors[0] as Error).message).toBe('boom');
  });

  it('drops events sent after close', async () => {
    const producer = new RecordingProducer();
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer,
    }).initialize();
    await sender.close();
    sender.sendAsync(orderPlaced());
    expect(sender.stats().dropped).toBe(1);
    expect(producer.published).toHaveLength(0);
  });
});

describe('EventSender.sendInTx', () => {
  it('delivers an event only when the transaction commits', async () => {
    const { producer, registry, queue } = setup();
    const outbox = new MemoryOutbox(producer);
    const sender = await createEventSender<MemoryTransaction>({
      topics: testTopics(),
      registry,
      outbox,
    }).initialize();

    const rolledBack = outbox.begin();
    await sender.sendInTx(rolledBack, orderPlaced('never'));
    rolledBack.rollback();
    await rolledBack.commit();
    expect(queue.size()).toBe(0);

    const committed = outbox.begin();
    await sender.sendInTx(committed, orderPlaced('o-1'));
    expect(queue.size()).toBe(0);
    await committed.commit();
    expect(queue.receive().map((m) => m.key)).toEqual(['o-1']);
  });

  it('rejects an unregistered event type before anything is added', async () => {
    const { producer } = setup();
    const outbox = new MemoryOutbox(producer);
    const sender = await createEventSender<MemoryTransaction>({
      topics: new EventTopics().register(OrderPlaced),
      registry: new MemorySchemaRegistry(),
      outbox,
    }).initialize();
    const tx = outbox.begin();
    await expect(sender.sendInTx(tx, UserSignedUp.of({ email: 'x' }))).rejects.toThrow(
      UnknownEventTypeError,
    );
    expect(tx.records).toHaveLength(0);
  });

  it('throws without an outbox', async () => {
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
    }).initialize();
    await expect(sender.sendInTx({}, orderPlaced())).rejects.toThrow(/needs an outbox/);
  });
});

describe('file sender', () => {
  it('appends one JSON line per event', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lambdacable-'));
    const path = join(dir, 'events.jsonl');
    const clock = new FakeClock();
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      fileSink: path,
      clock,
    }).initialize();
    sender.sendAsync(withKey(orderPlaced('o-1', 7), 'k', { key: 'h', value: '1' }));
    sender.sendAsync(UserSignedUp.of({ email: 'e@x' }));
    await sender.close();
    const lines = (await readFile(path, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toEqual({
      type: 'shop.OrderPlaced',
      topic: 'orders',
      key: 'k',
      headers: { h: '1' },
      timestamp: clock.now(),
      payload: { orderId: 'o-1', amount: 7 },
    });
    expect(lines[1]).toMatchObject({ type: 'auth.UserSignedUp', payload: { email: 'e@x' } });
    expect(sender.stats().sent).toBe(2);
  });
});

describe('NoopEventSender', () => {
  it('accepts everything and delivers nothing', async () => {
    const sender = new NoopEventSender();
    sender.sendAsync();
    await sender.sendInTx();
    await sender.close();
    expect(await sender.close()).toEqual({
      sent: 0,
      failed: 0,
      dropped: 0,
      sinkFailed: 0,
      unflushed: 0,
      complete: true,
    });
    expect(sender.stats()).toEqual({ sent: 0, dropped: 0, failed: 0, buffered: 0, sinkFailed: 0 });
  });
});
