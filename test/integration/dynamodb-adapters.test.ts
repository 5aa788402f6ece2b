import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import {
  DynamoAckStore,
  DynamoBroker,
  DynamoConnectionStore,
  DynamoRevocationStore,
  DynamoSchemaRegistry,
  DynamoSessionCache,
} from '../../lib/aws';
import { AvroCodec, SchemaCompatibilityError } from '../../lib/core';
import { brokerContract } from '../contract/broker';
import { connectionStoreContract } from '../contract/connections';
import { indexProbeContract } from '../contract/connections-index';
import { gatewaySessionContract } from '../contract/sessions';
import { localClients, testResources } from '../helpers/aws';
import { OrderPlaced } from '../helpers/events';

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('adapters');
  return shared;
};

brokerContract('DynamoBroker', async ({ broadcaster, config, clock, streamMetaTtl }) => {
  const res = await resources();
  return new DynamoBroker({
    client: res.dynamodb,
    historyTable: res.tables.history,
    sessionsTable: res.tables.sessions,
    broadcaster,
    config,
    clock,
    ...(streamMetaTtl === undefined ? {} : { streamMetaTtl }),
  });
});

brokerContract('DynamoBroker over a DynamoSessionCache given to it', async (o) => {
  const res = await resources();
  const { broadcaster, config, clock, streamMetaTtl } = o;
  const sessions = new DynamoSessionCache({
    client: res.dynamodb,
    tableName: res.tables.sessions,
    config,
    clock,
  });
  return new DynamoBroker({
    client: res.dynamodb,
    historyTable: res.tables.history,
    sessions,
    broadcaster,
    config,
    clock,
    ...(streamMetaTtl === undefined ? {} : { streamMetaTtl }),
  });
});

connectionStoreContract('DynamoConnectionStore', async () => {
  const res = await resources();
  return new DynamoConnectionStore({ client: res.dynamodb, tableName: res.tables.connections });
});

indexProbeContract('DynamoConnectionStore', async () => {
  const res = await resources();
  return new DynamoConnectionStore({ client: res.dynamodb, tableName: res.tables.connections });
});

gatewaySessionContract('DynamoConnectionStore + DynamoBroker', async ({ clock }) => {
  const res = await resources();
  return {
    store: new DynamoConnectionStore({ client: res.dynamodb, tableName: res.tables.connections }),
    sessions: new DynamoSessionCache({
      client: res.dynamodb,
      tableName: res.tables.sessions,
      clock,
    }),
    revocations: new DynamoRevocationStore({
      client: res.dynamodb,
      tableName: res.tables.sessions,
      clock,
    }),
    broker: (broadcaster, sessions) =>
      new DynamoBroker({
        client: res.dynamodb,
        historyTable: res.tables.history,
        sessions,
        broadcaster,
        clock,
      }),
  };
});

describe('DynamoAckStore', () => {
  it('only moves a level forward, also under concurrent writers', async () => {
    const res = await resources();
    const store = new DynamoAckStore({ client: res.dynamodb, tableName: res.tables.acks });
    expect(await store.load('g', 'p')).toBeUndefined();
    await Promise.all([5n, 17n, 3n, 12n, 16n].map((l) => store.save('g', 'p', l)));
    expect(await store.load('g', 'p')).toBe(17n);
    await store.save('g', 'p', 2n);
    expect(await store.load('g', 'p')).toBe(17n);
    // SQS sequence numbers have 20 digits: beyond Number precision.
    await store.save('g', 'big', 18_446_744_073_709_551_615_000n);
    expect(await store.load('g', 'big')).toBe(18_446_744_073_709_551_615_000n);
  });
});

describe('DynamoSchemaRegistry', () => {
  const v1 = { type: 'record', name: 'reg.T', fields: [{ name: 'a', type: 'int' }] } as const;

  it('returns one id for one schema, also under concurrent registration', async () => {
    const res = await resources();
    const registry = () =>
      new DynamoSchemaRegistry({ client: res.dynamodb, tableName: res.tables.schemas });
    const ids = await Promise.all(
      Array.from({ length: 6 }, () => registry().register('reg.T', v1 as never)),
    );
    expect(new Set(ids).size).toBe(1);
    expect(await registry().register('reg.T', v1 as never)).toBe(ids[0]);
    expect(await registry().getById(ids[0]!)).toMatchObject({ name: 'reg.T' });
    expect(await registry().getById(99_999)).toBeUndefined();
  });

  it('accepts a compatible version and rejects an incompatible one', async () => {
    const res = await resources();
    const registry = new DynamoSchemaRegistry({
      client: res.dynamodb,
      tableName: res.tables.schemas,
    });
    const s = { type: 'record', name: 'reg.U', fields: [{ name: 'a', type: 'int' }] };
    const id1 = await registry.register('reg.U', s as never);
    const id2 = await registry.register('reg.U', {
      ...s,
      fields: [...s.fields, { name: 'b', type: 'string', default: '' }],
    } as never);
    expect(id2).not.toBe(id1);
    await expect(
      registry.register('reg.U', { ...s, fields: [{ name: 'a', type: 'string' }] } as never),
    ).rejects.toThrow(SchemaCompatibilityError);
  });

  it('serves the codec: encode with one instance, decode with another', async () => {
    const res = await resources();
    const make = () =>
      new AvroCodec(
        new DynamoSchemaRegistry({ client: res.dynamodb, tableName: res.tables.schemas }),
      );
    const bytes = await make().encode(OrderPlaced, { orderId: 'o-1', amount: 3 });
    expect(await make().decode(bytes, OrderPlaced)).toEqual({ orderId: 'o-1', amount: 3 });
  });
});

describe('DynamoBroker across instances', () => {
  it('appends each source once and in order when two instances take turns on one stream, reading the meta item only after the other one wrote', async () => {
    const res = await resources();
    const reads = new Map<string, number>();
    /** A client of its own per instance, counting its GetItem calls with middleware. */
    const counting = (name: string) => {
      const { dynamodb } = localClients();
      dynamodb.middlewareStack.add(
        (next, context) => (args) => {
          if (context.commandName === 'GetItemCommand') reads.set(name, (reads.get(name) ?? 0) + 1);
          return next(args);
        },
        { step: 'initialize', name: 'countGetItem' },
      );
      return dynamodb;
    };
    const delivered: { offset?: number; data: string }[] = [];
    const broadcaster = {
      broadcast: async (m: { offset?: number; data: string }) => {
        delivered.push({ offset: m.offset, data: m.data });
      },
      broadcastCommand: async () => {},
      subscribe: async () => {},
      unsubscribe: async () => {},
    };
    const broker = (name: string) =>
      new DynamoBroker({
        client: counting(name),
        historyTable: res.tables.history,
        sessionsTable: res.tables.sessions,
        broadcaster,
      });
    const a = broker('a');
    const b = broker('b');
    const stream = `turns-${Date.now()}`;
    const append = (on: DynamoBroker, n: number) =>
      on.handleBroadcast({ stream, data: String(n), meta: { sourceOffset: String(n) } });

    for (let n = 1; n <= 10; n++) await append(a, n);
    expect(reads.get('a')).toBe(1); // its own appends need no read
    for (let n = 11; n <= 20; n++) await append(n % 2 ? a : b, n);
    // Redeliveries to the instance that did not append them are recognised.
    await append(a, 20);
    await append(b, 19);

    const history = await a.historyFrom(stream, (await a.historySince(stream, 0))[0]!.epoch!, 0);
    expect(history.map((m) => [m.offset, m.data])).toEqual(
      Array.from({ length: 20 }, (_, i) => [i + 1, String(i + 1)]),
    );
    expect(delivered.slice(0, 20).map((d) => d.offset)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
  });

  it('recognises a source position an older release stored as a number', async () => {
    const res = await resources();
    const { dynamodb } = localClients();
    const delivered: { offset?: number; data: string }[] = [];
    const broker = new DynamoBroker({
      client: dynamodb,
      historyTable: res.tables.history,
      sessionsTable: res.tables.sessions,
      broadcaster: {
        broadcast: async (m: { offset?: number; data: string }) => {
          delivered.push({ offset: m.offset, data: m.data });
        },
        broadcastCommand: async () => {},
        subscribe: async () => {},
        unsubscribe: async () => {},
      },
    });
    const stream = `numeric-source-${Date.now()}`;
    const expiresAt = { N: String(Math.floor(Date.now() / 1000) + 3600) };
    // What the previous release wrote: two messages, their sources and the meta as numbers.
    for (const [sk, source] of [
      [1, '100'],
      [2, '200'],
    ] as const) {
      await dynamodb.send(
        new PutItemCommand({
          TableName: res.tables.history,
          Item: {
            pk: { S: stream },
            sk: { N: String(sk) },
            data: { S: `"m${sk}"` },
            ts: { N: String(Date.now()) },
            expiresAt,
            source: { N: source },
          },
        }),
      );
    }
    await dynamodb.send(
      new PutItemCommand({
        TableName: res.tables.history,
        Item: {
          pk: { S: stream },
          sk: { N: '0' },
          lastOffset: { N: '2' },
          epoch: { S: 'old-epoch' },
          lastAt: { N: String(Date.now()) },
          expiresAt,
          source: { N: '200' },
        },
      }),
    );
    const append = (data: string, sourceOffset: string) =>
      broker.handleBroadcast({ stream, data, meta: { sourceOffset } });
    await append('"m2"', '200'); // the last: broadcast again with its offset
    await append('"m1"', '100'); // older and retained: a duplicate
    await append('"m3"', '300'); // new
    expect(delivered.map((d) => [d.data, d.offset])).toEqual([
      ['"m2"', 2],
      ['"m3"', 3],
    ]);
  });
});
