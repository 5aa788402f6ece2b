import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, inject, it } from 'vitest';
import { DynamoConnectionStore } from '../../lib/aws';
import { shardOf } from '../../lib/realtime/fanout/spread';
import { testResources } from '../helpers/aws';
import { fastRetry } from '../helpers/faults';

/**
 * A client whose subscription writes to `hot` (a `byStreamShard` partition key) are throttled
 * on every attempt, as DynamoDB throttles a table write when its index partition is over
 * 1,000 writes/s (DynamoDB Local never throttles: the fault is injected).
 */
function clientWithHotShard(hot: string): { client: DynamoDBClient; throttled: () => number } {
  let throttled = 0;
  const client = new DynamoDBClient({
    endpoint: inject('dynamodbEndpoint'),
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    retryStrategy: fastRetry(3),
  });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const item = (args.input as { Item?: { fanKey?: { S?: string } } }).Item;
      if (context.commandName === 'PutItemCommand' && item?.fanKey?.S === hot) {
        throttled++;
        const error = new Error('injected: the index partition is over its write rate');
        error.name = 'ThrottlingException';
        Object.assign(error, { $metadata: { httpStatusCode: 400 }, $fault: 'client' });
        throw error;
      }
      return next(args);
    },
    { step: 'finalizeRequest', priority: 'low', name: 'hotShard' },
  );
  return { client, throttled: () => throttled };
}

describe('DynamoConnectionStore: a stream is not bound to one partition', () => {
  it('spreads a stream twice as wide when a write to its hot shard is throttled, and stores the subscription in its new shard', async () => {
    const res = await testResources('spread');
    const stream = 'crowd';
    const hot = clientWithHotShard(`${stream}#0`);
    const store = new DynamoConnectionStore({
      client: hot.client,
      tableName: res.tables.connections,
    });
    // Connections whose shard under a spread of 2 is shard 1: off the hot one.
    const ids = Array.from({ length: 200 }, (_, i) => `conn-${i}`)
      .filter((c) => shardOf(c, 2) === 1)
      .slice(0, 5);
    expect(await store.addSubscription({ connectionId: ids[0]!, stream, identifier: 'i' })).toBe(
      'added',
    );
    // Every attempt of the SDK's retry hit the hot shard, then the store spread the stream.
    expect(hot.throttled()).toBe(3);
    for (const connectionId of ids.slice(1)) {
      await store.addSubscription({ connectionId, stream, identifier: 'i' });
    }
    // The later ones used the new spread at once (cached): no write met the hot shard again.
    expect(hot.throttled()).toBe(3);

    // A reader on a plain client learns the spread from shard 0 and finds every subscriber.
    const reader = new DynamoConnectionStore({
      client: res.dynamodb,
      tableName: res.tables.connections,
    });
    const shard0 = await reader.readSlice({ stream, shard: 0, prefix: '' }, 100);
    expect(shard0.spread).toBe(2);
    expect(shard0.subscribers).toEqual([]);
    const shard1 = await reader.readSlice({ stream, shard: 1, prefix: '' }, 100);
    expect(shard1.subscribers.map((s) => s.connectionId).sort()).toEqual([...ids].sort());
  });

  it('gives up with the throttle when the stream is as wide as it can be, and stores nothing', async () => {
    const res = await testResources('spread-max');
    const plain = new DynamoConnectionStore({
      client: res.dynamodb,
      tableName: res.tables.connections,
    });
    const stream = 'widest';
    expect(await plain.spreadStream(stream, 1024)).toBe(1024);
    const id = 'conn-x';
    const hot = clientWithHotShard(`${stream}#${shardOf(id, 1024)}`);
    const store = new DynamoConnectionStore({
      client: hot.client,
      tableName: res.tables.connections,
    });
    await expect(
      store.addSubscription({ connectionId: id, stream, identifier: 'i' }),
    ).rejects.toThrow(/ThrottlingException/);
    expect(await plain.subscriptionsOf(id)).toEqual([]);
  });
});
