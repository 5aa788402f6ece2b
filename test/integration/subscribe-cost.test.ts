import { describe, expect, it } from 'vitest';
import { DynamoBroker, DynamoConnectionStore, DynamoSessionCache } from '../../lib/aws';
import { composeRealtime, configFromEnv, createConnectToken } from '../../lib/core';
import { MemoryConnectionApi } from '../../lib/testing';
import { testResources } from '../helpers/aws';

// What one subscribe costs on DynamoDB Local, as the connection holds more: the same calls
// on the same items, whatever it holds (it grew with the count before: every subscribe read
// all of the connection's subscriptions and rewrote the whole session).

const JWT = 'subscribe-cost-jwt-secret-0123456789abcdef';

describe('subscribe cost', () => {
  it('makes the same DynamoDB calls for the 100th subscription as for the first, and none on the session', async () => {
    const res = await testResources('subscribe-cost');
    const calls: string[] = [];
    res.dynamodb.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { TableName?: string };
        const table = String(input.TableName ?? '').replace(/^.*-/, '');
        calls.push(`${context.commandName} ${table}`);
        return next(args);
      },
      { step: 'initialize', name: 'countCalls' },
    );
    const sessions = new DynamoSessionCache({
      client: res.dynamodb,
      tableName: res.tables.sessions,
    });
    const api = new MemoryConnectionApi();
    const { gateway } = composeRealtime(
      {
        store: new DynamoConnectionStore({
          client: res.dynamodb,
          tableName: res.tables.connections,
        }),
        api,
        sessions,
        config: {
          ...configFromEnv({}),
          jwtSecret: JWT,
          publicStreams: true,
          maxSubscriptions: 200,
        },
      },
      (broadcaster) =>
        new DynamoBroker({
          client: res.dynamodb,
          historyTable: res.tables.history,
          sessions,
          broadcaster,
        }),
    );
    const jid = await createConnectToken({ sub: 'u1', ttlSeconds: 600 }, JWT);
    const protocols = 'actioncable-v1-ext-json';
    await gateway.connect({ connectionId: 'cost-1', query: { jid }, protocols });
    expect(await gateway.welcome('cost-1')).toBe(true);
    const subscribe = async (n: number) => {
      const identifier = JSON.stringify({ channel: '$pubsub', stream_name: `public:s${n}` });
      calls.length = 0;
      await gateway.receive('cost-1', JSON.stringify({ command: 'subscribe', identifier }));
      expect(api.framesOf('cost-1').at(-1)).toEqual({ type: 'confirm_subscription', identifier });
      return [...calls];
    };
    const first = await subscribe(1);
    for (let n = 2; n < 100; n++) await subscribe(n);
    const hundredth = await subscribe(100);
    expect(hundredth).toEqual(first);
    expect(first.filter((c) => c.endsWith('sessions'))).toEqual([]);
    // The connection read, the count raised on condition, the new stream's spread read (then
    // cached), the subscription put.
    expect(first).toEqual([
      'GetItemCommand connections',
      'UpdateItemCommand connections',
      'GetItemCommand connections',
      'PutItemCommand connections',
    ]);
  }, 60_000);
});
