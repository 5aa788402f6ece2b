import {
  QueryCommand,
  TransactionCanceledException,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoPresenceStore } from '../../lib/aws';
import { type PresenceChange, ThrottledError } from '../../lib/core';
import { presenceStoreContract } from '../contract/presence';
import { localClients, testResources } from '../helpers/aws';

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('presence');
  return shared;
};

presenceStoreContract('DynamoPresenceStore', async () => {
  const res = await resources();
  const tableName = res.tables.connections;
  let seq = 0;
  // The changes go into the transaction as items of their own (the runtime's are outbox rows):
  // what a test reads back is exactly what committed, in the order the hook numbered them.
  const changes = async (list: readonly PresenceChange[]): Promise<TransactWriteItem[]> =>
    list.map((change) => ({
      Put: {
        TableName: tableName,
        Item: marshall(
          { pk: `evt#${change.stream}`, sk: String(++seq).padStart(10, '0'), change },
          { removeUndefinedValues: true },
        ),
      },
    }));
  return {
    store: new DynamoPresenceStore({ client: res.dynamodb, tableName, changes }),
    committed: async (stream) => {
      const out = await res.dynamodb.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `evt#${stream}` } },
          ConsistentRead: true,
        }),
      );
      return (out.Items ?? []).map((item) => unmarshall(item).change as PresenceChange);
    },
  };
});

const T0 = Date.UTC(2100, 0, 1);

/**
 * A store whose next transaction on `stream` waits for `race()` first: what another Lambda
 * does between this one's reads and its write.
 */
async function racedStore(): Promise<{
  store: DynamoPresenceStore;
  other: DynamoPresenceStore;
  beforeNextWrite(stream: string, race: () => Promise<unknown>): void;
}> {
  const res = await resources();
  const client = localClients().dynamodb;
  let pending: { stream: string; race: () => Promise<unknown> } | undefined;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const race = pending;
      if (
        context.commandName === 'TransactWriteItemsCommand' &&
        race &&
        JSON.stringify(args.input).includes(`p#${race.stream}`)
      ) {
        pending = undefined;
        await race.race();
      }
      return next(args);
    },
    { step: 'initialize' },
  );
  const tableName = res.tables.connections;
  return {
    store: new DynamoPresenceStore({ client, tableName }),
    other: new DynamoPresenceStore({ client: res.dynamodb, tableName }),
    beforeNextWrite: (stream, race) => {
      pending = { stream, race };
    },
  };
}

describe('DynamoPresenceStore under a race between read and write', () => {
  it('joins again (one join, one leave, one join) when the last leave wins the race', async () => {
    const { store, other, beforeNextWrite } = await racedStore();
    const stream = `race-${Date.now()}-1`;
    expect(await other.join(stream, 'a', 'alice', null, T0)).toEqual({ joined: true });
    let leave: { left?: string } | undefined;
    beforeNextWrite(stream, async () => {
      leave = await other.leave(stream, 'a', T0);
    });
    // It read alice present, so planned no join; the leave removed her before its write.
    expect(await store.join(stream, 'b', 'alice', null, T0)).toEqual({ joined: true });
    expect(leave).toEqual({ id: 'alice', left: 'alice' });
    expect((await other.members(stream, T0)).total).toBe(1);
  });

  it('emits no leave when a join wins the race against the last leave', async () => {
    const { store, other, beforeNextWrite } = await racedStore();
    const stream = `race-${Date.now()}-2`;
    await other.join(stream, 'a', 'alice', null, T0);
    let join: { joined: boolean } | undefined;
    beforeNextWrite(stream, async () => {
      join = await other.join(stream, 'b', 'alice', null, T0);
    });
    // It read a as the last session, so planned a leave; b joined before its write.
    expect(await store.leave(stream, 'a', T0)).toEqual({ id: 'alice' });
    expect(join).toEqual({ joined: false });
    expect(await other.members(stream, T0)).toEqual({
      total: 1,
      records: [{ id: 'alice', info: null }],
    });
  });

  it('keeps a restored session when it joins between the expiry read and write', async () => {
    const { store, other, beforeNextWrite } = await racedStore();
    const stream = `race-${Date.now()}-3`;
    await other.join(stream, 'old', 'alice', null, T0);
    await other.drop('old', T0, 15_000);
    beforeNextWrite(stream, () => other.join(stream, 'restored', 'alice', null, T0 + 15_000));
    const leaves = await store.expire(T0 + 15_000);
    expect(leaves.filter((l) => l.stream === stream)).toEqual([]);
    expect((await other.members(stream, T0 + 15_000)).total).toBe(1);
    expect(await other.leave(stream, 'restored', T0 + 15_000)).toEqual({
      id: 'alice',
      left: 'alice',
    });
  });
});

/**
 * A store whose first `conflicts` transactions are cancelled as DynamoDB cancels one that met
 * another on an item (`TransactionConflict`), before they reach DynamoDB Local: the emulator
 * runs transactions one at a time and never produces it.
 */
async function conflictingStore(conflicts: number) {
  const res = await resources();
  const client = localClients().dynamodb;
  const tries = { transactions: 0 };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'TransactWriteItemsCommand') return next(args);
      tries.transactions++;
      if (tries.transactions > conflicts) return next(args);
      const items = (args.input as { TransactItems: unknown[] }).TransactItems;
      throw new TransactionCanceledException({
        message: 'Transaction cancelled, please refer cancellation reasons for specific reasons',
        $metadata: { httpStatusCode: 400 },
        CancellationReasons: items.map((_, i) => ({
          Code: i === 0 ? 'TransactionConflict' : 'None',
        })),
      });
    },
    { step: 'initialize' },
  );
  const tableName = res.tables.connections;
  return {
    store: new DynamoPresenceStore({ client, tableName }),
    reader: new DynamoPresenceStore({ client: res.dynamodb, tableName }),
    tries,
  };
}

describe('DynamoPresenceStore when a transaction meets another (TransactionConflict)', () => {
  it('tries again until it commits: one join, the member and its count item once', async () => {
    const { store, reader, tries } = await conflictingStore(5);
    const stream = `conflict-${Date.now()}-1`;
    expect(await store.join(stream, 'a', 'alice', { n: 1 }, T0)).toEqual({ joined: true });
    expect(tries.transactions).toBe(6);
    expect(await store.join(stream, 'b', 'bob', { n: 2 }, T0)).toEqual({ joined: true });
    expect(tries.transactions).toBe(7);
    // A limit of 0 reads one member item, not both: the total comes from the count items.
    expect(await reader.members(stream, T0, 0)).toEqual({ total: 2, records: [] });
    expect(await reader.leave(stream, 'a', T0)).toEqual({ id: 'alice', left: 'alice' });
    expect(await reader.members(stream, T0, 0)).toEqual({ total: 1, records: [] });
    expect(await reader.members(stream, T0)).toEqual({
      total: 1,
      records: [{ id: 'bob', info: { n: 2 } }],
    });
  });

  it('gives up after 12 tries with a ThrottledError, and nothing is written', async () => {
    const { store, reader, tries } = await conflictingStore(Number.POSITIVE_INFINITY);
    const stream = `conflict-${Date.now()}-2`;
    const error = await store.join(stream, 'a', 'alice', null, T0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ThrottledError);
    expect((error as Error).message).toMatch(/still conflicting after 12 tries/);
    expect(tries.transactions).toBe(12);
    expect(await reader.members(stream, T0)).toEqual({ total: 0, records: [] });
    // No record either: a leave of the connection finds nothing to leave.
    expect(await reader.leave(stream, 'a', T0)).toEqual({});
  });
});
