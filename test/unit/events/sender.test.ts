import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AvroCodec,
  createEventSender,
  EventSenderError,
  EventTopics,
  LimitExceededError,
  NoopEventSender,
  type OutgoingMessage,
  type Producer,
  UnknownEventTypeError,
  withKey,
} from '../../../lib/core';
import {
  MemoryClient,
  MemoryOutbox,
  MemorySchemaRegistry,
  type MemoryTransaction,
} from '../../../lib/testing';
import { FakeClock } from '../../helpers/clock';
import { OrderPlaced, orderPlaced, testTopics, UserSignedUp } from '../../helpers/events';

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

/** Waits (polling, no assertion on time) until `done()` holds. */
async function settle(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
}

/** A file sink path whose directory does not exist: every append fails. */
async function brokenSink(): Promise<string> {
  return join(await mkdtemp(join(tmpdir(), 'lambdacable-')), 'missing', 'events.jsonl');
}

describe('EventSender never throws into the caller', () => {
  it('reports and counts a failing file sink: no unhandled rejection, consistent stats', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const errors: unknown[] = [];
      const producer = new RecordingProducer();
      const sender = await createEventSender({
        topics: testTopics(),
        registry: new MemorySchemaRegistry(),
        producer,
        fileSink: await brokenSink(),
        onError: (e) => errors.push(e),
      }).initialize();
      sender.sendAsync(orderPlaced('a'));
      // Not closed: the failure surfaces while nobody awaits the sender.
      await settle(() => errors.length > 0 || unhandled.length > 0);
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
      expect((errors[0] as NodeJS.ErrnoException).code).toBe('ENOENT');
      expect(producer.published).toHaveLength(1);
      expect(sender.stats()).toEqual({
        sent: 1,
        dropped: 0,
        failed: 0,
        buffered: 0,
        sinkFailed: 1,
      });
      expect(await sender.close()).toEqual({
        sent: 1,
        failed: 0,
        dropped: 0,
        sinkFailed: 1,
        unflushed: 0,
        complete: false,
      });
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  it('exits a plain node process normally when the file sink fails (Node makes unhandled rejections fatal)', async () => {
    const { execFile } = await import('node:child_process');
    const sink = await brokenSink();
    const script = `
      import { createEventSender, EventTopics, defineEvent } from './lib/core.ts';
      import { MemorySchemaRegistry } from './lib/testing.ts';
      const E = defineEvent({ name: 'x.E', topic: 't', schema: { type: 'record', fields: [{ name: 'a', type: 'string' }] } });
      const sender = await createEventSender({
        topics: new EventTopics().register(E),
        registry: new MemorySchemaRegistry(),
        producer: { publish: async () => {} },
        fileSink: ${JSON.stringify(sink)},
        onError: () => {},
      }).initialize();
      sender.sendAsync(E.of({ a: '1' }));
      await new Promise((r) => setTimeout(r, 200));
      console.log(JSON.stringify(sender.stats()));
    `;
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>(
      (resolve) => {
        const child = execFile(
          process.execPath,
          ['--import', 'tsx', '--input-type=module', '-e', script],
          { cwd: process.cwd() },
          (_error, out) => resolve({ code: child.exitCode, stdout: out }),
        );
      },
    );
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ sent: 1, sinkFailed: 1, buffered: 0 });
  });

  it('ignores what onError throws', async () => {
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer: {
        publish: async () => {
          throw new Error('boom');
        },
      },
      onError: () => {
        throw new Error('onError too');
      },
    }).initialize();
    sender.sendAsync(orderPlaced('a'));
    expect(await sender.close()).toMatchObject({ failed: 1, complete: false });
  });
});

describe('EventSender.close', () => {
  it('reports what a producer that keeps failing did not take', async () => {
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer: {
        publish: async () => {
          throw new Error('unavailable');
        },
      },
      onError: () => {},
    }).initialize();
    sender.sendAsync(orderPlaced('a'));
    sender.sendAsync(orderPlaced('b'));
    expect(await sender.close()).toEqual({
      sent: 0,
      failed: 2,
      dropped: 0,
      sinkFailed: 0,
      unflushed: 0,
      complete: false,
    });
  });

  it('reports as unflushed what a producer that never answers still holds when timeoutMs passes', async () => {
    const producer = new RecordingProducer();
    producer.gate = new Promise(() => {});
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer,
    }).initialize();
    sender.sendAsync(orderPlaced('a'));
    sender.sendAsync(orderPlaced('b'));
    const report = await sender.close({ timeoutMs: 20 });
    expect(report).toEqual({
      sent: 0,
      failed: 0,
      dropped: 0,
      sinkFailed: 0,
      unflushed: 2,
      complete: false,
    });
    expect(sender.stats().buffered).toBe(2);
  });

  it('is complete when everything went out', async () => {
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer: new RecordingProducer(),
    }).initialize();
    sender.sendAsync(orderPlaced('a'));
    expect(await sender.close()).toMatchObject({ sent: 1, unflushed: 0, complete: true });
  });
});

describe('createEventSender(...).close (flachnetz EventSenderInitializer.Close)', () => {
  it('is a no-op reporting nothing before initialize', async () => {
    const init = createEventSender({ topics: testTopics(), registry: new MemorySchemaRegistry() });
    expect(await init.close()).toEqual({
      sent: 0,
      failed: 0,
      dropped: 0,
      sinkFailed: 0,
      unflushed: 0,
      complete: true,
    });
  });

  it('closes the initialized sender and returns its report', async () => {
    const producer = new RecordingProducer();
    const init = createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer,
    });
    const sender = await init.initialize();
    sender.sendAsync(orderPlaced('a'));
    expect(await init.close()).toMatchObject({ sent: 1, complete: true });
    sender.sendAsync(orderPlaced('late'));
    expect(sender.stats().dropped).toBe(1);
    expect(producer.published).toHaveLength(1);
  });
});

describe('the file sink and transactions', () => {
  async function lines(path: string): Promise<string[]> {
    const text = await readFile(path, 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { payload: { orderId: string } }).payload.orderId);
  }

  it('writes a sendInTx event once its memory transaction committed, never for a rollback', async () => {
    const { producer } = setup();
    const outbox = new MemoryOutbox(producer);
    const path = join(await mkdtemp(join(tmpdir(), 'lambdacable-')), 'events.jsonl');
    const sender = await createEventSender<MemoryTransaction>({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      outbox,
      fileSink: path,
    }).initialize();

    const rolledBack = outbox.begin();
    await sender.sendInTx(rolledBack, orderPlaced('never'));
    rolledBack.rollback();
    await rolledBack.commit();
    const committed = outbox.begin();
    await sender.sendInTx(committed, orderPlaced('o-1'));
    expect(await lines(path)).toEqual([]);
    await committed.commit();
    expect(await lines(path)).toEqual(['o-1']);
  });

  it('writes for an outbox that does not see the commit only on afterCommit(tx)', async () => {
    const added: unknown[] = [];
    const path = join(await mkdtemp(join(tmpdir(), 'lambdacable-')), 'events.jsonl');
    const sender = await createEventSender<unknown[]>({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      outbox: { addToTx: (tx, record) => tx.push(record) },
      fileSink: path,
    }).initialize();
    const cancelled: unknown[] = [];
    await sender.sendInTx(cancelled, orderPlaced('cancelled'));
    const tx: unknown[] = added;
    await sender.sendInTx(tx, orderPlaced('o-2'));
    expect(await lines(path)).toEqual([]);
    await sender.afterCommit(tx);
    await sender.afterCommit(tx);
    expect(await lines(path)).toEqual(['o-2']);
  });
});

describe('refusals before commit', () => {
  it('sendInTx refuses an event over the SQS body limit, adding nothing', async () => {
    const { producer } = setup();
    const outbox = new MemoryOutbox(producer);
    const sender = await createEventSender<MemoryTransaction>({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      outbox,
    }).initialize();
    const tx = outbox.begin();
    await expect(
      sender.sendInTx(tx, OrderPlaced.of({ orderId: 'x'.repeat(200_000), amount: 1 })),
    ).rejects.toThrow(/is \d+ bytes, the limit is 262144 \(MAX_SQS_BODY_BYTES/);
    expect(tx.records).toEqual([]);
  });

  it('sendAsync refuses it through onError and counts it failed', async () => {
    const errors: unknown[] = [];
    const producer = new RecordingProducer();
    const sender = await createEventSender({
      topics: testTopics(),
      registry: new MemorySchemaRegistry(),
      producer,
      onError: (e) => errors.push(e),
    }).initialize();
    sender.sendAsync(OrderPlaced.of({ orderId: 'x'.repeat(200_000), amount: 1 }));
    expect(await sender.close()).toMatchObject({ failed: 1, sent: 0, complete: false });
    expect(errors[0]).toBeInstanceOf(LimitExceededError);
    expect(producer.published).toEqual([]);
  });
});
