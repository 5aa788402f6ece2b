import { type DynamoDBClient, paginateQuery } from '@aws-sdk/client-dynamodb';
import { DynamoPresenceStore } from '../lib/aws';
import { type CapacityMeter, itemBytes, meterCapacity } from './capacity';
import { withDynamoDBLocal } from './dynamodb-local';
import type { Figure } from './util';
import { inWaves } from './ws-clients';

/** Members of the streams read: one that fits in a read of `LIMIT`, and larger ones. */
const SIZES = [10, 1_000, 4_000] as const;
/** The `info` reply's records (the gateway's default `infoLimit`). */
const LIMIT = 100;
/** The size the model computes, beyond what this machine writes in a bench run. */
const MODELLED = 100_000;
const PREFIX = 'bench-presence';

/** Read units on AWS of a strongly consistent Query page: its items' size in 4 KB units. */
function consistentReadUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 4096));
}

/** What one read cost: calls, units as DynamoDB Local reported them, and by the items' size. */
function cost(meter: CapacityMeter) {
  const bySize = meter.pages.reduce(
    (n, page) => n + consistentReadUnits(page.reduce((b, item) => b + itemBytes(item), 0)),
    0,
  );
  const items = meter.pages.reduce((n, page) => n + page.length, 0);
  return { calls: meter.calls, reported: meter.units, bySize, items };
}

/**
 * The read of a stream's presence (`DynamoPresenceStore.members`, what `info` and
 * `presenceOf` run) on one DynamoDB Local, on streams of {@link SIZES} members joined through
 * the adapter: requests and read units per read, against the read that counted `total` by
 * reading every member item (what `members` did before the count items, run here as that
 * Query). {@link MODELLED} members are computed from the figures measured: the read of every
 * member grows by the bytes per member, ours stays what the largest stream measured.
 */
export async function benchPresenceRead(): Promise<Figure[]> {
  return withDynamoDBLocal(PREFIX, async (dynamodb, tables) => {
    const store = new DynamoPresenceStore({ client: dynamodb, tableName: tables.connections });
    const transactions = countTransactions(dynamodb);
    const now = Date.now();
    let joins = 0;
    for (const size of SIZES) {
      const joined = await inWaves(
        Array.from({ length: size }, (_, i) => i),
        32,
        (i) =>
          store.join(
            `bench/presence-${size}`,
            `conn-${size}-${i}`,
            `member-${String(i).padStart(6, '0')}`,
            { name: `Member ${i}`, seat: i },
            now,
          ),
      );
      const failed = joined.filter((o) => o.status === 'rejected').length;
      if (failed > 0) throw new Error(`presence read bench: ${failed} joins of ${size} failed`);
      joins += size;
    }
    const perJoin = transactions.count / joins;
    const meter = meterCapacity(dynamodb);
    const figures: Figure[] = [];
    let largest: { ours: ReturnType<typeof cost>; bytes: number } | undefined;
    for (const size of SIZES) {
      const stream = `bench/presence-${size}`;
      meter.reset();
      const read = await store.members(stream, Date.now(), LIMIT);
      const ours = cost(meter);
      if (read.total !== size || read.records.length !== Math.min(size, LIMIT)) {
        throw new Error(
          `presence read bench: ${stream}: total ${read.total}, ${read.records.length} records`,
        );
      }
      meter.reset();
      let counted = 0;
      for await (const page of paginateQuery(
        { client: dynamodb },
        {
          TableName: tables.connections,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :m)',
          ExpressionAttributeValues: { ':pk': { S: `p#${stream}` }, ':m': { S: 'm#' } },
          ConsistentRead: true,
        },
      )) {
        counted += page.Items?.length ?? 0;
      }
      const every = cost(meter);
      const bytes = meter.pages.flat().reduce((n, item) => n + itemBytes(item), 0) / counted;
      const units = (c: ReturnType<typeof cost>) => (c.reported > 0 ? c.reported : c.bySize);
      figures.push({
        name: `presence read, ${size.toLocaleString('en-US')} members (limit ${LIMIT})`,
        value: `${ours.calls} Query, ${units(ours).toFixed(1)} RCU`,
        reference: `${every.calls} Query, ${units(every).toFixed(1)} RCU reading all ${counted}`,
        ratio: `${(units(ours) / units(every)).toFixed(2)}x RCU`,
        extra: `total ${read.total} exact; ${ours.items} items read; by item size ${ours.bySize} / ${every.bySize} RCU`,
      });
      largest = { ours, bytes };
    }
    if (largest) {
      const every = Math.ceil((MODELLED * largest.bytes) / 4096);
      const pages = Math.ceil((MODELLED * largest.bytes) / (1024 * 1024));
      figures.push({
        name: `presence read, ${MODELLED.toLocaleString('en-US')} members (model)`,
        value: `${largest.ours.calls} Query, ${largest.ours.bySize} RCU`,
        reference: `${pages} Query pages, ${every} RCU reading all`,
        ratio: `${(largest.ours.bySize / every).toFixed(4)}x RCU`,
        extra: `by item size (AWS's rule) on both sides; inputs: ${largest.bytes.toFixed(0)} B per member item and our ${largest.ours.items} items read at ${SIZES.at(-1)} (flat: limit + the count items), 4 KB per RCU, 1 MB per page`,
      });
    }
    figures.push({
      name: 'TransactWriteItems per join of a new id, 32 at once on one stream',
      value: perJoin.toFixed(3),
      reference: '1 without a conflict',
      ratio: `${perJoin.toFixed(3)}x`,
      extra: `${joins} joins; DynamoDB Local runs transactions one at a time, so none conflicts here: on AWS a join meeting another on its count item tries again (12 tries at most)`,
    });
    return figures;
  });
}

/** Counts the client's TransactWriteItems calls (each try of a presence change). */
function countTransactions(client: DynamoDBClient): { count: number } {
  const counter = { count: 0 };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'TransactWriteItemsCommand') counter.count++;
      return next(args);
    },
    { step: 'initialize', name: 'benchTransactionCounter' },
  );
  return counter;
}
