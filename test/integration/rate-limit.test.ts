import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoRateLimiter } from '../../lib/aws';
import { rateLimiterContract } from '../contract/rate-limit';
import { localClients, testResources } from '../helpers/aws';

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('rate');
  return shared;
};

rateLimiterContract('DynamoRateLimiter', async (limit) => {
  const res = await resources();
  return new DynamoRateLimiter({ client: res.dynamodb, tableName: res.tables.connections, limit });
});

describe('DynamoRateLimiter: cost', () => {
  /** A client that counts its calls by command. */
  function countingClient(): { client: DynamoDBClient; calls: Record<string, number> } {
    const client = localClients().dynamodb;
    const calls: Record<string, number> = {};
    client.middlewareStack.add(
      (next, context) => (args) => {
        calls[context.commandName!] = (calls[context.commandName!] ?? 0) + 1;
        return next(args);
      },
      { step: 'initialize' },
    );
    return { client, calls };
  }

  it('takes or refuses with one read and one write per frame', async () => {
    const res = await resources();
    const { client, calls } = countingClient();
    const limiter = new DynamoRateLimiter({
      client,
      tableName: res.tables.connections,
      limit: { rate: 1, burst: 3 },
    });
    const now = Date.now();
    for (let i = 0; i < 5; i++) await limiter.take(`cost-${now}`, now);
    expect(calls).toEqual({ GetItemCommand: 5, UpdateItemCommand: 5 });
  });

  it('pays for a lost race with a write, never another read', async () => {
    const res = await resources();
    const { client, calls } = countingClient();
    const limiter = new DynamoRateLimiter({
      client,
      tableName: res.tables.connections,
      limit: { rate: 1, burst: 10 },
    });
    const now = Date.now();
    const verdicts = await Promise.all(
      Array.from({ length: 30 }, () => limiter.take(`race-${now}`, now)),
    );
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(10);
    expect(calls.GetItemCommand).toBe(30);
    expect(calls.UpdateItemCommand).toBeLessThanOrEqual(30 * 3);
  });
});
