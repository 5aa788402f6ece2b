/**
 * A writer in another language, as docs/events.md "Writing events from another language" describes
 * it: the write side uses only the low-level DynamoDB API (attribute values by hand) and
 * plain avsc, nothing of this library; the read side is the real path (outbox stream →
 * OutboxRelay → SQS FIFO → AvroCodec).
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  type AttributeValue,
  CreateTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import avro from 'avsc';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoSchemaRegistry } from '../../lib/aws';
import {
  AvroCodec,
  BROADCAST_TOPIC,
  BroadcastEvent,
  decodeEnvelope,
  defineEvent,
} from '../../lib/core';
import { zigZagLong } from '../helpers/avro-wire';
import { testResources } from '../helpers/aws';
import { outboxPoller, receiveAll, relayFor } from '../helpers/relay';

// ---------------------------------------------------------------------------------------
// The foreign writer: what a Python/Java/Go service would code from docs/events.md.
// ---------------------------------------------------------------------------------------

type PlainSchema = string | PlainSchema[] | { type: string; [k: string]: unknown };

/** Avro binary of `value` driven by a plain JSON schema: records, unions, string, int, long, null. */
function avroBinary(schema: PlainSchema, value: unknown): number[] {
  if (Array.isArray(schema)) {
    const index = value === null ? schema.indexOf('null') : schema.findIndex((b) => b !== 'null');
    return [...zigZagLong(BigInt(index)), ...avroBinary(schema[index]!, value)];
  }
  const type = typeof schema === 'string' ? schema : schema.type;
  switch (type) {
    case 'null':
      return [];
    case 'string':
      // Plain avsc (not the library) for the string: a zig-zag length, then UTF-8.
      return [...avro.Type.forSchema('string').toBuffer(value)];
    case 'int':
    case 'long':
      return zigZagLong(BigInt(value as bigint | number));
    case 'record': {
      const fields = (schema as unknown as { fields: { name: string; type: PlainSchema }[] })
        .fields;
      const record = value as Record<string, unknown>;
      return fields.flatMap((f) => avroBinary(f.type, record[f.name]));
    }
    default:
      throw new Error(`the test writer does not encode ${type}`);
  }
}

/** Confluent framing by hand: 0x00, 4-byte big-endian schema id, Avro binary. */
function framed(schemaId: number, body: number[]): Uint8Array {
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(schemaId, 1);
  return new Uint8Array([...header, ...body]);
}

/** 12 hex digits of milliseconds, then 8 random bytes in hex. */
function eventId(nowMs: number): string {
  return nowMs.toString(16).padStart(12, '0') + randomBytes(8).toString('hex');
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** The docs' schema-table lookups and registration, raw. */
class ForeignSchemas {
  constructor(
    private readonly ddb: DynamoDBClient,
    private readonly table: string,
  ) {}

  /** The latest version of `subject`: Query `subject#…`, newest `v#` first. */
  async latest(subject: string): Promise<{ sk: string; id: number; hash: string } | undefined> {
    const out = await this.ddb.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
        ExpressionAttributeValues: { ':pk': { S: `subject#${subject}` }, ':v': { S: 'v#' } },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    const item = out.Items?.[0];
    if (!item) return undefined;
    return { sk: item.sk!.S!, id: Number(item.id!.N), hash: item.hash!.S! };
  }

  /** Every version item of `subject`. */
  async versions(subject: string): Promise<string[]> {
    const out = await this.ddb.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
        ExpressionAttributeValues: { ':pk': { S: `subject#${subject}` }, ':v': { S: 'v#' } },
        ConsistentRead: true,
      }),
    );
    return (out.Items ?? []).map((i) => `${i.sk!.S}→${i.id!.N}`);
  }

  /** The schema JSON stored under `id`. */
  async schema(id: number): Promise<string | undefined> {
    const out = await this.ddb.send(
      new GetItemCommand({
        TableName: this.table,
        Key: { pk: { S: `id#${id}` }, sk: { S: 'schema' } },
      }),
    );
    return out.Item?.schema?.S;
  }

  /** The id of the schema whose canonical JSON is `canonical`. */
  async idOf(canonical: string): Promise<number | undefined> {
    const out = await this.ddb.send(
      new GetItemCommand({
        TableName: this.table,
        Key: { pk: { S: `hash#${sha256(canonical)}` }, sk: { S: 'id' } },
        ConsistentRead: true,
      }),
    );
    return out.Item?.id?.N === undefined ? undefined : Number(out.Item.id.N);
  }

  /** Steps 1–6 of "Registering" in docs/events.md. */
  async register(subject: string, canonical: string): Promise<number> {
    const hash = sha256(canonical);
    for (let attempt = 0; attempt < 10; attempt++) {
      const latest = await this.latest(subject);
      if (latest?.hash === hash) return latest.id;
      const existing = await this.idOf(canonical);
      if (latest) {
        const previous = await this.schema(latest.id);
        // BACKWARD: the new schema reads data written with the previous one (throws if not).
        avro.Type.forSchema(JSON.parse(canonical)).createResolver(
          avro.Type.forSchema(JSON.parse(previous!)),
        );
      }
      let id = existing;
      if (id === undefined) {
        const out = await this.ddb.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: { pk: { S: 'counter' }, sk: { S: 'counter' } },
            UpdateExpression: 'ADD nextId :one',
            ExpressionAttributeValues: { ':one': { N: '1' } },
            ReturnValues: 'UPDATED_NEW',
          }),
        );
        id = Number(out.Attributes!.nextId!.N);
      }
      const version = Number(latest?.sk.slice(2) ?? '0') + 1;
      const put = (Item: Record<string, AttributeValue>): TransactWriteItem => ({
        Put: { TableName: this.table, Item, ConditionExpression: 'attribute_not_exists(pk)' },
      });
      const items = [
        put({
          pk: { S: `subject#${subject}` },
          sk: { S: `v#${String(version).padStart(6, '0')}` },
          id: { N: String(id) },
          hash: { S: hash },
        }),
      ];
      if (existing === undefined) {
        items.push(
          put({ pk: { S: `hash#${hash}` }, sk: { S: 'id' }, id: { N: String(id) } }),
          put({
            pk: { S: `id#${id}` },
            sk: { S: 'schema' },
            schema: { S: canonical },
            subject: { S: subject },
          }),
        );
      }
      try {
        await this.ddb.send(new TransactWriteItemsCommand({ TransactItems: items }));
        return id;
      } catch (error) {
        // Someone registered concurrently: start again.
        if (!(error instanceof TransactionCanceledException)) throw error;
      }
    }
    throw new Error(`could not register ${subject}`);
  }
}

/** The outbox `Put` of the docs' table, attribute by attribute. */
function outboxPut(
  table: string,
  e: {
    topic: string;
    key: string;
    type: string;
    payload: Uint8Array;
    headers?: Record<string, string>;
    nowMs: number;
    id?: string;
  },
): { put: TransactWriteItem; id: string } {
  const id = e.id ?? eventId(e.nowMs);
  const item: Record<string, AttributeValue> = {
    pk: { S: `${e.topic}#${e.key}` },
    sk: { S: id },
    topic: { S: e.topic },
    key: { S: e.key },
    type: { S: e.type },
    payload: { B: e.payload },
    createdAt: { N: String(e.nowMs) },
    expiresAt: { N: String(Math.floor(e.nowMs / 1000) + 86_400) },
  };
  if (e.headers && Object.keys(e.headers).length > 0) {
    item.headers = {
      M: Object.fromEntries(Object.entries(e.headers).map(([k, v]) => [k, { S: v }])),
    };
  }
  return {
    id,
    put: { Put: { TableName: table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' } },
  };
}

// ---------------------------------------------------------------------------------------
// The TypeScript side: event types consumers read with.
// ---------------------------------------------------------------------------------------

interface PaymentCaptured {
  paymentId: string;
  amountMicros: bigint;
  capturedAt: bigint;
}

const PaymentCaptured = defineEvent<PaymentCaptured>({
  name: 'shop.PaymentCaptured',
  topic: 'payments',
  schema: {
    type: 'record',
    fields: [
      { name: 'paymentId', type: 'string' },
      { name: 'amountMicros', type: 'long' },
      { name: 'capturedAt', type: { type: 'long', logicalType: 'timestamp-millis' } },
    ],
  },
  key: (v) => v.paymentId,
});

interface RefundIssued {
  refundId: string;
  amountMicros: bigint;
  reason: string | null;
}

const RefundIssued = defineEvent<RefundIssued>({
  name: 'shop.RefundIssued',
  topic: 'refunds',
  schema: {
    type: 'record',
    fields: [
      { name: 'refundId', type: 'string' },
      { name: 'amountMicros', type: 'long' },
      { name: 'reason', type: ['null', 'string'], default: null },
    ],
  },
});

// ---------------------------------------------------------------------------------------

const groups = [
  { name: 'payments', topics: ['payments', 'refunds'] },
  { name: 'broadcast', topics: [BROADCAST_TOPIC] },
];

describe('a foreign writer following docs/events.md (raw DynamoDB, DynamoDB Local + fauxqs)', () => {
  let env: Awaited<ReturnType<typeof testResources>>;
  let business: string;
  let schemas: ForeignSchemas;
  let registry: DynamoSchemaRegistry;
  let drain: () => Promise<void>;

  beforeAll(async () => {
    env = await testResources('foreign', groups);
    business = `${env.prefix}-payments`;
    await env.dynamodb.send(
      new CreateTableCommand({
        TableName: business,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    schemas = new ForeignSchemas(env.dynamodb, env.tables.schemas);
    registry = new DynamoSchemaRegistry({ client: env.dynamodb, tableName: env.tables.schemas });
    // One poller for the file: every outbox record is relayed once.
    ({ drain } = outboxPoller(
      env.outboxStreamArn!,
      relayFor(env.sqs, {
        payments: [env.queues.payments!.url],
        refunds: [env.queues.payments!.url],
        [BROADCAST_TOPIC]: [env.queues.broadcast!.url],
      }),
    ));
  });

  /** What a consumer of `queue` receives: SQS attributes and the decoded envelope. */
  async function delivered(queue: string) {
    const messages = await receiveAll(env.sqs, queue);
    return messages.map((m) => ({
      groupId: m.Attributes?.MessageGroupId,
      dedupId: m.Attributes?.MessageDeduplicationId,
      envelope: decodeEnvelope(m.Body!),
    }));
  }

  it('delivers an event committed with a business item, a long past 2^53 exact', async () => {
    // A TypeScript service registered the schema; the foreign writer finds the latest version.
    await new AvroCodec(registry).register(PaymentCaptured);
    const latest = await schemas.latest('shop.PaymentCaptured');
    expect(latest?.sk).toBe('v#000001');
    const stored = await schemas.schema(latest!.id);
    // The canonical JSON as docs/events.md spells it (logicalType dropped, the name qualified).
    const canonical =
      '{"name":"shop.PaymentCaptured","type":"record","fields":[{"name":"paymentId","type":"string"},{"name":"amountMicros","type":"long"},{"name":"capturedAt","type":"long"}]}';
    expect(stored).toBe(canonical);
    expect(await schemas.idOf(canonical)).toBe(latest!.id);

    const writerSchema = JSON.parse(stored!) as PlainSchema;
    const amounts = [2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n)];
    const written: { id: string; nowMs: number; amountMicros: bigint }[] = [];
    for (const [i, amountMicros] of amounts.entries()) {
      const nowMs = Date.now() + i;
      const value = { paymentId: 'p-1', amountMicros, capturedAt: 1_718_000_000_000n + BigInt(i) };
      const { put, id } = outboxPut(env.tables.outbox, {
        topic: 'payments',
        key: 'p-1',
        type: 'shop.PaymentCaptured',
        payload: framed(latest!.id, avroBinary(writerSchema, value)),
        headers: { source: 'billing-py' },
        nowMs,
      });
      await env.dynamodb.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Put: {
                TableName: business,
                Item: {
                  pk: { S: `p-1/${i}` },
                  amountMicros: { N: amountMicros.toString() },
                },
                ConditionExpression: 'attribute_not_exists(pk)',
              },
            },
            put,
          ],
        }),
      );
      written.push({ id, nowMs, amountMicros });
    }
    expect(written.map((w) => w.id)).toEqual(written.map((w) => w.id).sort());

    await drain();
    const got = await delivered(env.queues.payments!.url);
    expect(got).toHaveLength(3);
    const codec = new AvroCodec(registry);
    for (const [i, m] of got.entries()) {
      const w = written[i]!;
      expect(m.groupId).toBe('p-1');
      expect(m.dedupId).toBe(w.id);
      expect(m.envelope).toMatchObject({
        id: w.id,
        topic: 'payments',
        key: 'p-1',
        type: 'shop.PaymentCaptured',
        headers: { source: 'billing-py' },
        timestamp: w.nowMs,
      });
      expect(await codec.decode(m.envelope.payload, PaymentCaptured)).toEqual({
        paymentId: 'p-1',
        amountMicros: w.amountMicros,
        capturedAt: 1_718_000_000_000n + BigInt(i),
      });
    }
    // One key, one partition: offsets increase in commit order.
    const offsets = got.map((m) => m.envelope.offset);
    expect(offsets).toEqual([...offsets].sort((a, b) => (a < b ? -1 : 1)));
    expect(new Set(offsets).size).toBe(3);
  });

  it('never delivers the event of a cancelled foreign transaction', async () => {
    const { id } = (await schemas.latest('shop.PaymentCaptured'))!;
    const { put } = outboxPut(env.tables.outbox, {
      topic: 'payments',
      key: 'p-never',
      type: 'shop.PaymentCaptured',
      payload: framed(
        id,
        avroBinary(JSON.parse((await schemas.schema(id))!), {
          paymentId: 'p-never',
          amountMicros: 1n,
          capturedAt: 0n,
        }),
      ),
      nowMs: Date.now(),
    });
    const failing: TransactWriteItem = {
      Put: {
        TableName: business,
        Item: { pk: { S: 'p-never' } },
        ConditionExpression: 'attribute_exists(pk)',
      },
    };
    await expect(
      env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: [failing, put] })),
    ).rejects.toThrow(TransactionCanceledException);
    await drain();
    expect(await delivered(env.queues.payments!.url)).toEqual([]);
  });

  it('registers a brand-new schema the documented way, concurrently, and the library decodes it', async () => {
    // Built key by key in the docs' canonical order, as json.dumps would keep it.
    const v1 = JSON.stringify({
      name: 'shop.RefundIssued',
      type: 'record',
      fields: [
        { name: 'refundId', type: 'string' },
        { name: 'amountMicros', type: 'long' },
        { name: 'reason', type: ['null', 'string'], default: null, doc: 'why, if known' },
      ],
      doc: 'A refund was issued.',
    });
    // Two foreign writers and a TypeScript service register at once: one id, one version.
    const [a, b, c] = await Promise.all([
      schemas.register('shop.RefundIssued', v1),
      schemas.register('shop.RefundIssued', v1),
      registry.register('shop.RefundIssued', JSON.parse(v1)),
    ]);
    expect(b).toBe(a);
    expect(c).toBe(a);
    expect(await schemas.versions('shop.RefundIssued')).toEqual([`v#000001→${a}`]);
    expect(await registry.getById(a)).toEqual(JSON.parse(v1));

    // A compatible v2 (a field with a default) gets a new id and version 2.
    const v2 = JSON.stringify({
      name: 'shop.RefundIssued',
      type: 'record',
      fields: [
        { name: 'refundId', type: 'string' },
        { name: 'amountMicros', type: 'long' },
        { name: 'reason', type: ['null', 'string'], default: null, doc: 'why, if known' },
        { name: 'currency', type: 'string', default: 'EUR' },
      ],
      doc: 'A refund was issued.',
    });
    const idV2 = await schemas.register('shop.RefundIssued', v2);
    expect(idV2).not.toBe(a);
    expect(await schemas.latest('shop.RefundIssued')).toMatchObject({
      sk: 'v#000002',
      id: idV2,
    });
    // An incompatible version (a new field without default) is refused.
    const bad = v2.replace(
      '{"name":"currency","type":"string","default":"EUR"}',
      '{"name":"currency","type":"string","default":"EUR"},{"name":"ticket","type":"string"}',
    );
    expect(bad).not.toBe(v2);
    await expect(schemas.register('shop.RefundIssued', bad)).rejects.toThrow(/ticket/);
    await expect(registry.register('shop.RefundIssued', JSON.parse(bad))).rejects.toThrow(
      /not backward compatible/,
    );

    const events = [
      { id: a, schema: v1, value: { refundId: 'r-1', amountMicros: -(2n ** 60n), reason: null } },
      {
        id: idV2,
        schema: v2,
        value: { refundId: 'r-1', amountMicros: 2n ** 62n + 7n, reason: 'late', currency: 'USD' },
      },
    ];
    for (const e of events) {
      const { put } = outboxPut(env.tables.outbox, {
        topic: 'refunds',
        key: 'r-1',
        type: 'shop.RefundIssued',
        payload: framed(e.id, avroBinary(JSON.parse(e.schema), e.value)),
        nowMs: Date.now(),
      });
      await env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: [put] }));
    }
    await drain();
    const got = await delivered(env.queues.payments!.url);
    expect(got.map((m) => [m.groupId, m.envelope.topic, m.envelope.type])).toEqual([
      ['r-1', 'refunds', 'shop.RefundIssued'],
      ['r-1', 'refunds', 'shop.RefundIssued'],
    ]);
    const codec = new AvroCodec(registry);
    // With the writer schema, and with the TypeScript reader type (v1) for both versions.
    expect(await codec.decode(got[0]!.envelope.payload)).toEqual(events[0]!.value);
    expect(await codec.decode(got[1]!.envelope.payload)).toEqual(events[1]!.value);
    expect(await codec.decode(got[1]!.envelope.payload, RefundIssued)).toEqual({
      refundId: 'r-1',
      amountMicros: 2n ** 62n + 7n,
      reason: 'late',
    });
  });

  it('broadcasts to a stream with the documented topic, type and schema', async () => {
    expect(BROADCAST_TOPIC).toBe('lambdacable.broadcasts');
    const canonical =
      '{"name":"lambdacable.Broadcast","type":"record","fields":[{"name":"stream","type":"string"},{"name":"data","type":"string"}]}';
    const id =
      (await schemas.idOf(canonical)) ??
      (await schemas.register('lambdacable.Broadcast', canonical));
    // The docs' schema is the library's: a TypeScript sender finds the same id.
    expect(await new AvroCodec(registry).register(BroadcastEvent)).toBe(id);

    const value = { stream: 'orders/o-1', data: JSON.stringify({ placed: true }) };
    const { put, id: eventIdWritten } = outboxPut(env.tables.outbox, {
      topic: 'lambdacable.broadcasts',
      key: value.stream,
      type: 'lambdacable.Broadcast',
      payload: framed(id, avroBinary(JSON.parse(canonical), value)),
      nowMs: Date.now(),
    });
    await env.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: [put] }));
    await drain();
    const [m, ...rest] = await delivered(env.queues.broadcast!.url);
    expect(rest).toEqual([]);
    expect(m).toMatchObject({ groupId: 'orders/o-1', dedupId: eventIdWritten });
    expect(m!.envelope.type).toBe(BroadcastEvent.name);
    expect(await new AvroCodec(registry).decode(m!.envelope.payload, BroadcastEvent)).toEqual(
      value,
    );
  });
});
