import { describe, expect, it } from 'vitest';
import {
  COUNT_SHARDS,
  countKey,
  countShardOf,
  countUpdates,
} from '../../../../../lib/adapters/aws/dynamodb/presence-count';
import { bucketOf } from '../../../../../lib/realtime/keepalive/partitions';

describe('presence count items (DynamoPresenceStore)', () => {
  it('spreads ids alike over every shard, where the pinger bucket hash does not', () => {
    const ids = Array.from({ length: 1_000 }, (_, i) => `member-${String(i).padStart(6, '0')}`);
    const shards = new Set(ids.map(countShardOf));
    expect(shards.size).toBe(COUNT_SHARDS);
    for (const shard of shards) expect(shard).toBeGreaterThanOrEqual(0);
    // Why not bucketOf: 31 is −1 modulo 32, so sequential ids land on few buckets.
    expect(new Set(ids.map((id) => bucketOf(id, COUNT_SHARDS))).size).toBeLessThan(COUNT_SHARDS);
    // The largest shard holds no more than twice its share: joins of a crowd spread out.
    const sizes = new Map<number, number>();
    for (const id of ids) sizes.set(countShardOf(id), (sizes.get(countShardOf(id)) ?? 0) + 1);
    expect(Math.max(...sizes.values())).toBeLessThanOrEqual((2 * ids.length) / COUNT_SHARDS);
  });

  it('keys a count item by stream and shard, the same for the same id', () => {
    expect(countKey('room/1', 'alice')).toEqual({
      pk: { S: 'p#room/1' },
      sk: { S: `n#${countShardOf('alice')}` },
    });
    expect(countKey('room/1', 'alice')).toEqual(countKey('room/1', 'alice'));
  });

  it('sums the changes of one transaction per count item and leaves out a sum of zero', () => {
    const items = countUpdates(
      'connections',
      [
        { stream: 'room/1', type: 'join', id: 'alice' },
        { stream: 'room/1', type: 'leave', id: 'alice' },
        { stream: 'room/1', type: 'join', id: 'bob' },
        { stream: 'room/2', type: 'leave', id: 'bob' },
      ],
      0,
    );
    expect(items.map((i) => [i.Update?.Key, i.Update?.ExpressionAttributeValues?.[':d']])).toEqual([
      [countKey('room/1', 'bob'), { N: '1' }],
      [countKey('room/2', 'bob'), { N: '-1' }],
    ]);
    expect(items.every((i) => i.Update?.TableName === 'connections')).toBe(true);
  });
});
