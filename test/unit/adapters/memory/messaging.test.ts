import { describe, expect, it } from 'vitest';
import type { Message } from '../../../../lib/core';
import { MemoryClient, MemoryQueue } from '../../../../lib/testing';
import { FakeClock } from '../../../helpers/clock';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

function queueWith(...keys: string[]) {
  const clock = new FakeClock();
  const queue = new MemoryQueue({ maxReceiveCount: 3, backoff: (n) => n * 1000 }, clock);
  keys.forEach((key, i) => {
    queue.enqueue({
      id: `id-${i}`,
      key,
      value: bytes(`${key}${i}`),
      headers: {},
      type: undefined,
      offset: BigInt(i + 1),
    });
  });
  return { queue, clock };
}

describe('MemoryQueue', () => {
  it('delivers one message per group at a time, in order', () => {
    const { queue } = queueWith('a', 'a', 'b');
    const first = queue.receive();
    expect(first.map((m) => text(m.value))).toEqual(['a0', 'b2']);
    expect(queue.receive()).toEqual([]);
    queue.ack(first[0]!);
    expect(queue.receive().map((m) => text(m.value))).toEqual(['a1']);
  });

  it('drops a repeated id', () => {
    const { queue } = queueWith('a');
    queue.enqueue({
      id: 'id-0',
      key: 'a',
      value: bytes('dup'),
      headers: {},
      type: undefined,
      offset: 9n,
    });
    expect(queue.size()).toBe(1);
  });

  it('redelivers a nacked message after the back-off, holding its group', () => {
    const { queue, clock } = queueWith('a', 'a', 'b');
    const [a0, b2] = queue.receive();
    queue.nack(a0!, 'failed');
    queue.ack(b2!);
    expect(queue.receive()).toEqual([]);
    clock.advance(999);
    expect(queue.receive()).toEqual([]);
    clock.advance(1);
    const again = queue.receive();
    expect(again.map((m) => [text(m.value), m.receiveCount, m.offset])).toEqual([['a0', 2, 1n]]);
  });

  it('dead-letters a message after maxReceiveCount and lets its group go on', () => {
    const { queue, clock } = queueWith('a', 'a');
    for (let i = 0; i < 3; i++) {
      const [m] = queue.receive();
      expect(text(m!.value)).toBe('a0');
      queue.nack(m!, `failure ${i}`);
      clock.advance(10_000);
    }
    expect(queue.deadLetters.map((d) => [text(d.message.value), d.reason])).toEqual([
      ['a0', 'failure 2'],
    ]);
    expect(queue.receive().map((m) => text(m.value))).toEqual(['a1']);
  });
  it('redrives dead letters to the end of their group with their offsets and fresh receive counts', () => {
    const { queue, clock } = queueWith('a', 'a');
    for (let i = 0; i < 3; i++) {
      queue.nack(queue.receive()[0]!, 'no');
      clock.advance(10_000);
    }
    queue.enqueue({
      id: 'id-9',
      key: 'a',
      value: bytes('a9'),
      headers: {},
      type: undefined,
      offset: 9n,
    });
    expect(queue.redrive()).toBe(1);
    expect(queue.deadLetters).toEqual([]);
    const order: [string, bigint, number][] = [];
    for (let m = queue.receive()[0]; m; m = queue.receive()[0]) {
      order.push([text(m.value), m.offset, m.receiveCount]);
      queue.ack(m);
    }
    expect(order).toEqual([
      ['a1', 2n, 1],
      ['a9', 9n, 1],
      ['a0', 1n, 1],
    ]);
  });
});

describe('MemoryClient', () => {
  it('fans a topic out to every consumer group with one offset sequence', async () => {
    const client = new MemoryClient({
      applications: { shop: { topic: 'orders', consumers: ['billing', 'mail'] } },
    });
    const producer = client.newProducer('shop');
    await producer.publish({ key: 'k1', value: bytes('x') });
    await producer.publish({ key: 'k2', value: bytes('y') });
    for (const group of ['billing', 'mail']) {
      const got = client.queue('orders', group).receive();
      expect(got.map((m) => [m.key, m.offset])).toEqual([
        ['k1', 1n],
        ['k2', 2n],
      ]);
    }
  });

  it('refuses an unknown application', () => {
    const client = new MemoryClient({ applications: {} });
    expect(() => client.newProducer('ghost')).toThrow(/unknown application: ghost/);
  });

  it('refuses to publish after close', async () => {
    const client = new MemoryClient({ applications: { a: { topic: 't' } } });
    const producer = client.newProducer('a');
    await producer.close();
    await expect(producer.publish({ key: 'k', value: bytes('x') })).rejects.toThrow(/closed/);
  });

  it('settles a message by the first of ack and nack, as Cadence: an ack is final, so is a nack', async () => {
    const client = new MemoryClient({
      applications: { app: { topic: 't' } },
      retry: { maxReceiveCount: 5, backoff: () => 0 },
      pollIntervalMs: 5,
    });
    const consumer = client.newConsumer('app', 'g');
    const producer = client.newProducer('app');
    await producer.publish({ key: 'a', value: bytes('acked-first') });
    await producer.publish({ key: 'b', value: bytes('nacked-first') });
    await consumer.start();
    const seen: string[] = [];
    for await (const m of consumer.messages()) {
      const v = text(m.value);
      seen.push(v);
      if (v === 'acked-first') {
        await m.ack();
        await m.nack('ignored');
      } else {
        await m.nack('retry');
        await m.ack();
      }
      if (seen.length === 3) break;
    }
    await consumer.stop();
    // The nacked message came back once; the acked one never did.
    expect(seen.sort()).toEqual(['acked-first', 'nacked-first', 'nacked-first']);
  });

  it('consumes with ack, retries a nack, dead-letters, and keeps other partitions flowing', async () => {
    const client = new MemoryClient({
      applications: { app: { topic: 't' } },
      retry: { maxReceiveCount: 2, backoff: () => 0 },
      pollIntervalMs: 5,
    });
    const consumer = client.newConsumer('app', 'g');
    const producer = client.newProducer('app');
    await producer.publish({ key: 'bad', value: bytes('poison') });
    await producer.publish({ key: 'bad', value: bytes('after-poison') });
    await producer.publish({ key: 'good', value: bytes('fine') });
    await consumer.start();
    const seen: string[] = [];
    const iterate = (async () => {
      for await (const m of consumer.messages() as AsyncIterable<Message>) {
        const v = text(m.value);
        seen.push(`${m.partition}:${v}:${m.offset}`);
        if (v === 'poison') await m.nack(new Error('cannot handle'));
        else await m.ack();
        if (seen.length === 4) await consumer.stop();
      }
    })();
    await iterate;
    expect(seen).toEqual(['bad:poison:1', 'good:fine:3', 'bad:poison:1', 'bad:after-poison:2']);
    expect(client.queue('t', 'g').deadLetters.map((d) => text(d.message.value))).toEqual([
      'poison',
    ]);
    expect(client.queue('t', 'g').size()).toBe(0);
  });

  it('returns in-flight messages on stop', async () => {
    const client = new MemoryClient({ applications: { app: { topic: 't' } }, pollIntervalMs: 5 });
    const consumer = client.newConsumer('app', 'g');
    await client.newProducer('app').publish({ key: 'k', value: bytes('x') });
    await consumer.start();
    for await (const m of consumer.messages()) {
      expect(text(m.value)).toBe('x');
      await consumer.stop();
    }
    const again = client.queue('t', 'g').receive();
    expect(again.map((m) => m.receiveCount)).toEqual([1]);
  });
});
