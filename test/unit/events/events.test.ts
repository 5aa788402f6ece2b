import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import {
  AvroCodec,
  DecodeError,
  defineEvent,
  EncodeError,
  EventTopics,
  frame,
  SchemaCompatibilityError,
  UnknownEventTypeError,
  withKey,
} from '../../../lib/core';
import { MemorySchemaRegistry } from '../../../lib/testing';
import { readZigZagLong, zigZagLong } from '../../helpers/avro-wire';
import { OrderPlaced, orderPlaced, testTopics, UserSignedUp } from '../../helpers/events';

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

interface LedgerEntry {
  account: string;
  cents: bigint;
}

const LedgerEntry = defineEvent<LedgerEntry>({
  name: 'bank.LedgerEntry',
  topic: 'ledger',
  schema: {
    type: 'record',
    fields: [
      { name: 'account', type: 'string' },
      { name: 'cents', type: 'long' },
    ],
  },
  key: (v) => v.account,
});

/** The schema a foreign writer registers: plain JSON, nothing of this library. */
const ledgerSchema: avro.Schema = {
  type: 'record',
  name: 'bank.LedgerEntry',
  fields: [
    { name: 'account', type: 'string' },
    { name: 'cents', type: 'long' },
  ],
};

const EDGES = {
  'the int64 maximum, 2^63-1': 2n ** 63n - 1n,
  'the int64 minimum, -2^63': -(2n ** 63n),
  'the first integer a double cannot hold, 2^53+1': 2n ** 53n + 1n,
  'its negative, -(2^53+1)': -(2n ** 53n + 1n),
  zero: 0n,
};

describe('Avro long (64-bit, as bigint)', () => {
  for (const [label, cents] of Object.entries(EDGES)) {
    it(`round-trips ${label} exactly through AvroCodec`, async () => {
      const registry = new MemorySchemaRegistry();
      const codec = new AvroCodec(registry);
      const bytes = await codec.encode(LedgerEntry, { account: 'a-1', cents });
      expect(await codec.decode(bytes, LedgerEntry)).toEqual({ account: 'a-1', cents });
      // Also with the writer schema from the registry as the reader.
      const decoded = await new AvroCodec(registry).decode<LedgerEntry>(bytes);
      expect(decoded.cents).toBe(cents);
    });

    it(`decodes ${label} written by a foreign Avro writer`, async () => {
      const registry = new MemorySchemaRegistry();
      await registry.register('other', 'string');
      const id = await registry.register('bank.LedgerEntry', ledgerSchema);
      const account = [...Buffer.from('a-1')];
      // What a Java or Python producer sends: 0x00, 4-byte big-endian id, Avro binary
      // (a string is a zig-zag length then UTF-8; a long its zig-zag varint).
      const bytes = new Uint8Array([
        0x00,
        (id >>> 24) & 0xff,
        (id >>> 16) & 0xff,
        (id >>> 8) & 0xff,
        id & 0xff,
        ...zigZagLong(BigInt(account.length)),
        ...account,
        ...zigZagLong(cents),
      ]);
      const codec = new AvroCodec(registry);
      expect(await codec.decode(bytes, LedgerEntry)).toEqual({ account: 'a-1', cents });
      expect((await codec.decode<LedgerEntry>(bytes)).cents).toBe(cents);
    });

    it(`writes ${label} as the zig-zag varint a foreign reader expects`, async () => {
      const registry = new MemorySchemaRegistry();
      const codec = new AvroCodec(registry);
      const bytes = await codec.encode(LedgerEntry, { account: 'a-1', cents });
      expect(bytes[0]).toBe(0);
      const id = new DataView(bytes.buffer, bytes.byteOffset).getUint32(1, false);
      expect(await registry.getById(id)).toEqual(ledgerSchema);
      const length = readZigZagLong(bytes, 5);
      expect(length.value).toBe(3n);
      const accountEnd = length.next + Number(length.value);
      expect(Buffer.from(bytes.subarray(length.next, accountEnd)).toString()).toBe('a-1');
      const long = readZigZagLong(bytes, accountEnd);
      expect(long.value).toBe(cents);
      expect(long.next).toBe(bytes.length);
      expect([...bytes.subarray(accountEnd)]).toEqual(zigZagLong(cents));
    });
  }

  it('accepts a safe-integer number on encode and always decodes a bigint', async () => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    const bytes = await codec.encode(LedgerEntry, {
      account: 'a',
      cents: Number.MAX_SAFE_INTEGER as unknown as bigint,
    });
    expect(await codec.decode(bytes, LedgerEntry)).toEqual({
      account: 'a',
      cents: BigInt(Number.MAX_SAFE_INTEGER),
    });
  });

  it.each([
    ['2^63', 2n ** 63n],
    ['-2^63-1', -(2n ** 63n) - 1n],
    ['a number past 2^53', 2 ** 53 + 2],
    ['a fraction', 1.5],
    ['a decimal string', '5'],
  ])('throws EncodeError naming the field for %s', async (_, cents) => {
    const codec = new AvroCodec(new MemorySchemaRegistry());
    const error = await codec
      .encode(LedgerEntry, { account: 'a', cents: cents as bigint })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EncodeError);
    expect((error as Error).message).toMatch(/bad field\(s\) cents/);
  });

  it('makes every long a bigint: in unions, arrays, maps and field defaults', async () => {
    const Nested = defineEvent<{
      maybe: bigint | null;
      list: bigint[];
      byName: Record<string, bigint>;
    }>({
      name: 'x.Nested',
      schema: {
        type: 'record',
        fields: [
          { name: 'maybe', type: ['null', 'long'] },
          { name: 'list', type: { type: 'array', items: 'long' } },
          { name: 'byName', type: { type: 'map', values: 'long' } },
        ],
      },
    });
    const value = { maybe: 2n ** 62n, list: [-(2n ** 63n), 1n], byName: { a: 2n ** 63n - 1n } };
    const codec = new AvroCodec(new MemorySchemaRegistry());
    expect(await codec.decode(await codec.encode(Nested, value), Nested)).toEqual(value);
    const WithDefault = defineEvent<{
      maybe: bigint | null;
      list: bigint[];
      byName: Record<string, bigint>;
      since: bigint;
    }>({
      name: 'x.Nested',
      schema: {
        type: 'record',
        fields: [
          { name: 'maybe', type: ['null', 'long'] },
          { name: 'list', type: { type: 'array', items: 'long' } },
          { name: 'byName', type: { type: 'map', values: 'long' } },
          { name: 'since', type: 'long', default: 1_700_000_000_000 },
        ],
      },
    });
    const old = await codec.encode(Nested, value);
    // The same codec, two versions of one event name: each reader gets its own resolver.
    expect(await codec.decode(old, WithDefault)).toEqual({ ...value, since: 1_700_000_000_000n });
  });

  it("makes a long spelled as an object (a Java writer's timestamp-millis) a bigint too", async () => {
    const registry = new MemorySchemaRegistry();
    const id = await registry.register('x.Stamped', {
      type: 'record',
      name: 'x.Stamped',
      fields: [{ name: 'at', type: { type: 'long', logicalType: 'timestamp-millis' } }],
    } as avro.Schema);
    const at = 2n ** 62n + 3n;
    const bytes = frame(id, new Uint8Array(zigZagLong(at)));
    expect(await new AvroCodec(registry).decode(bytes)).toEqual({ at });
  });

  it('reads an int written by an older schema as a bigint long', async () => {
    const registry = new MemorySchemaRegistry();
    const V1 = defineEvent<{ account: string; cents: number }>({
      name: 'bank.LedgerEntry',
      schema: {
        type: 'record',
        fields: [
          { name: 'account', type: 'string' },
          { name: 'cents', type: 'int' },
        ],
      },
    });
    const bytes = await new AvroCodec(registry).encode(V1, { account: 'a', cents: -7 });
    expect(await new AvroCodec(registry).decode(bytes, LedgerEntry)).toEqual({
      account: 'a',
      cents: -7n,
    });
    // int → long is a backward-compatible change for the registry.
    await expect(new AvroCodec(registry).register(LedgerEntry)).resolves.toBeGreaterThan(0);
  });
});
