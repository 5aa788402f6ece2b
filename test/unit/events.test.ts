import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import {
  AvroCodec,
  DecodeError,
  defineEvent,
  EncodeError,
  EventTopics,
  frame,
  MemorySchemaRegistry,
  SchemaCompatibilityError,
  UnknownEventTypeError,
  withKey,
} from '../../lib';
import { OrderPlaced, orderPlaced, testTopics, UserSignedUp } from '../helpers/events';

describe('defineEvent', () => {
  it('uses the name as the Avro full name', () => {
    expect(OrderPlaced.avroType.name).toBe('shop.OrderPlaced');
  });

  it('refuses a schema whose name is not the event name', () => {
    expect(() =>
      defineEvent({
        name: 'a.B',
        schema: { type: 'record', name: 'x.Y', fields: [] },
      }),
    ).toThrow(/must be the event name/);
  });
});

describe('EventTopics', () => {
  it('maps event types to topics', () => {
    const topics = testTopics();
    expect(topics.topicForType(OrderPlaced)).toBe('orders');
    expect(topics.topicForType('auth.UserSignedUp')).toBe('users');
    expect(topics.topics().sort()).toEqual(['orders', 'users']);
  });

  it('lets register override the type topic and lists distinct topics', () => {
    const topics = new EventTopics().register(OrderPlaced, 'all').register(UserSignedUp, 'all');
    expect(topics.topicForType(OrderPlaced)).toBe('all');
    expect(topics.topics()).toEqual(['all']);
  });

  it('throws UnknownEventTypeError naming an unregistered type', () => {
    const topics = new EventTopics().register(OrderPlaced);
    expect(() => topics.topicForType(UserSignedUp)).toThrow(UnknownEventTypeError);
    expect(() => topics.metadataOf(UserSignedUp.of({ email: 'a@b' }))).toThrow(
      /auth\.UserSignedUp/,
    );
  });

  it('derives the key from the type when the event has none', () => {
    expect(testTopics().metadataOf(orderPlaced('o-7'))).toEqual({
      type: 'shop.OrderPlaced',
      topic: 'orders',
      key: 'o-7',
      headers: {},
    });
    expect(testTopics().metadataOf(UserSignedUp.of({ email: 'x' })).key).toBeUndefined();
  });

  it('takes key and headers from withKey over the type key', () => {
    const event = withKey(
      orderPlaced('o-7'),
      'customer-3',
      { key: 'trace', value: 't1' },
      { key: 'tenant', value: 'acme' },
    );
    expect(testTopics().metadataOf(event)).toMatchObject({
      key: 'customer-3',
      headers: { trace: 't1', tenant: 'acme' },
    });
  });
});

describe('AvroCodec', () => {
  it('frames payloads as 0x00, big-endian schema id, Avro binary', async () => {
    const registry = new MemorySchemaRegistry();
    await registry.register('other', 'string');
    const codec = new AvroCodec(registry);
    const bytes = await codec.encode(OrderPlaced, { orderId: 'o-1', amount: 5 });
    expect(bytes[0]).toBe(0);
    const id = new DataView(bytes.buffer, bytes.byteOffset).getUint32(1, false);
    expect(id).toBe(2);
    // Any standard Avro reader decodes the body with the registered schema.
    const schema = await registry.getById(id);
    const body = Buffer.from(bytes.subarray(5));
    expect(avro.Type.forSchema(schema!).fromBuffer(body)).toEqual({ orderId: 'o-1', amount: 5 });
    expect(await codec.decode(bytes, OrderPlaced)).toEqual({ orderId: 'o-1', amount: 5 });
  });

  it('reads newer events with an older reader schema', async () => {
    const registry = new MemorySchemaRegistry();
    const v2 = defineEvent<{ orderId: string; amount: number; currency: string }>({
      name: 'shop.OrderPlaced',
      schema: {
        type: 'record',
        fields: [
          { name: 'orderId', type: 'string' },
          { name: 'amount', type: 'int' },
          { name: 'currency', type: 'string', default: 'EUR' },
        ],
      },
    });
    await new AvroCodec(registry).register(OrderPlaced);
    const bytes = await new AvroCodec(registry).encode(v2, {
      orderId: 'o-2',
      amount: 9,
      currency: 'USD',
    });
    const reader = new AvroCodec(registry);
    expect(await reader.decode(bytes, OrderPlaced)).toEqual({ orderId: 'o-2', amount: 9 });
    // The new schema reads old data, filling the default.
    const old = await reader.encode(OrderPlaced, { orderId: 'o-1', amount: 1 });
    expect(await reader.decode(old, v2)).toEqual({ orderId: 'o-1', amount: 1, currency: 'EUR' });
  });

  it('throws DecodeError for a wrong magic byte', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    await expect(codec.decode(new Uint8Array([1, 0, 0, 0, 1, 2]))).rejects.toThrow(
      /unknown magic byte: 1/,
    );
  });

  it('throws DecodeError for a payload shorter than the header', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    await expect(codec.decode(new Uint8Array([0, 0]))).rejects.toThrow(DecodeError);
  });

  it('throws DecodeError for an unknown schema id', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    await expect(codec.decode(frame(77, new Uint8Array([2])))).rejects.toThrow(
      /unknown schema id: 77/,
    );
  });

  it('throws DecodeError for a truncated payload', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    const bytes = await codec.encode(OrderPlaced, { orderId: 'a-long-order-id', amount: 5 });
    const error = await codec.decode(bytes.subarray(0, 9), OrderPlaced).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DecodeError);
    expect((error as DecodeError).schemaId).toBe(1);
    await expect(codec.decode(bytes.subarray(0, 9))).rejects.toThrow(DecodeError);
  });

  it('throws DecodeError when the writer schema cannot be read as the reader type', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    const bytes = await codec.encode(UserSignedUp, { email: 'x' });
    await expect(codec.decode(bytes, OrderPlaced)).rejects.toThrow(/cannot be read as/);
  });

  it('throws EncodeError naming the bad field of an invalid value', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    await expect(
      codec.encode(OrderPlaced, { orderId: 'o', amount: 'many' as unknown as number }),
    ).rejects.toThrow(EncodeError);
    await expect(
      codec.encode(OrderPlaced, { orderId: 'o', amount: 'many' as unknown as number }),
    ).rejects.toThrow(/amount/);
  });
});

describe('MemorySchemaRegistry', () => {
  const fieldsV1 = [{ name: 'a', type: 'int' }];
  const v1: avro.Schema = { type: 'record', name: 'x.Y', fields: fieldsV1 };

  it('returns the same id for an identical schema, however it is spelled', async () => {
    const r = new MemorySchemaRegistry();
    const id = await r.register('x.Y', v1);
    expect(await r.register('x.Y', JSON.parse(JSON.stringify(v1)))).toBe(id);
    expect(
      await r.register('x.Y', {
        name: 'x.Y',
        fields: [{ type: 'int', name: 'a' }],
        type: 'record',
      }),
    ).toBe(id);
  });

  it('gives a compatible new version a new id', async () => {
    const r = new MemorySchemaRegistry();
    const id1 = await r.register('x.Y', v1);
    const id2 = await r.register('x.Y', {
      type: 'record',
      name: 'x.Y',
      fields: [...fieldsV1, { name: 'b', type: 'string', default: '' }],
    });
    expect(id2).not.toBe(id1);
    expect(await r.getById(id2)).toMatchObject({ name: 'x.Y' });
  });

  it('rejects a version that cannot read the previous one', async () => {
    const r = new MemorySchemaRegistry();
    await r.register('x.Y', v1);
    const error = await r
      .register('x.Y', {
        type: 'record',
        name: 'x.Y',
        fields: [...fieldsV1, { name: 'b', type: 'string' }],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SchemaCompatibilityError);
    expect((error as SchemaCompatibilityError).subject).toBe('x.Y');
    expect((error as Error).message).toMatch(/not backward compatible/);
  });

  it('returns undefined for an unknown id', async () => {
    expect(await new MemorySchemaRegistry().getById(5)).toBeUndefined();
  });
});
