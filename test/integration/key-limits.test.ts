import { describe, expect, it } from 'vitest';
import { DynamoBroker, DynamoConnectionStore, DynamoSessionCache } from '../../lib/aws';
import {
  composeRealtime,
  configFromEnv,
  createConnectToken,
  LimitExceededError,
  MAX_IDENTIFIER_BYTES,
  MAX_STREAM_BYTES,
  signStreamName,
} from '../../lib/core';
import { MemoryConnectionApi } from '../../lib/testing';
import { testResources } from '../helpers/aws';

// The limits against DynamoDB Local, which enforces the real key sizes (2048-byte partition
// keys, 1024-byte sort keys): what used to fail with a ValidationException now gets a
// clear answer.

let shared: ReturnType<typeof testResources> | undefined;
const resources = () => {
  shared ??= testResources('limits');
  return shared;
};

async function stack() {
  const res = await resources();
  const store = new DynamoConnectionStore({
    client: res.dynamodb,
    tableName: res.tables.connections,
  });
  const api = new MemoryConnectionApi();
  const sessions = new DynamoSessionCache({
    client: res.dynamodb,
    tableName: res.tables.sessions,
  });
  const config = {
    ...configFromEnv({}),
    jwtSecret: 'jwt',
    streamsSecret: 'streams',
    publicStreams: true,
    publicStreamPrefix: '',
  };
  const { broker, gateway } = composeRealtime(
    { store, api, sessions, config },
    (broadcaster) =>
      new DynamoBroker({
        client: res.dynamodb,
        historyTable: res.tables.history,
        sessions,
        broadcaster,
      }),
  );
  return { store, api, broker, gateway };
}

describe('key limits on DynamoDB', () => {
  it('rejects a subscription whose key would exceed 1024 bytes (it got no answer before)', async () => {
    const { gateway, api } = await stack();
    const jid = await createConnectToken({ sub: 'u1', ttlSeconds: 600 }, 'jwt');
    await gateway.connect({
      connectionId: 'k1',
      query: { jid },
      protocols: 'actioncable-v1-ext-json',
    });
    const identifier = JSON.stringify({
      channel: '$pubsub',
      signed_stream_name: signStreamName('r'.repeat(400), 'streams'),
    });
    await gateway.receive('k1', JSON.stringify({ command: 'subscribe', identifier }));
    expect(api.framesOf('k1')).toEqual([{ type: 'reject_subscription', identifier }]);
  });

  it('connects with a sid over 2 KB: a new session, no ValidationException', async () => {
    const { gateway, store } = await stack();
    const jid = await createConnectToken({ sub: 'u1', ttlSeconds: 600 }, 'jwt');
    const result = await gateway.connect({
      connectionId: 'k2',
      query: { jid, sid: 'x'.repeat(3000) },
      protocols: 'actioncable-v1-ext-json',
    });
    expect(result.statusCode).toBe(200);
    expect((await store.getConnection('k2'))?.sid).toBeTruthy();
  });

  it('refuses keys over the limits with LimitExceededError and finds nothing under them', async () => {
    const { store } = await stack();
    const long = 's'.repeat(MAX_STREAM_BYTES + 1);
    await expect(
      store.addSubscription({ connectionId: 'k3', stream: long, identifier: 'i' }),
    ).rejects.toBeInstanceOf(LimitExceededError);
    await expect(
      store.addSubscription({
        connectionId: 'k3',
        stream: 's',
        identifier: 'i'.repeat(MAX_IDENTIFIER_BYTES + 1),
      }),
    ).rejects.toBeInstanceOf(LimitExceededError);
    expect(await store.getConnection('c'.repeat(3000))).toBeUndefined();
    expect(await store.connectionsOf('u'.repeat(3000))).toEqual([]);
    const pages: unknown[] = [];
    for await (const page of store.subscribersOf('s'.repeat(3000))) pages.push(page);
    expect(pages).toEqual([]);
    await store.removeSubscription('k3', long, 'i');
  });
});
