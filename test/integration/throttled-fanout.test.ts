import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiGatewayConnectionApi,
  DynamoBroker,
  DynamoConnectionStore,
  DynamoSessionCache,
} from '../../lib/aws';
import { composeDelivery } from '../../lib/core';
import { testResources } from '../helpers/aws';

/**
 * A stand-in for API Gateway's management API on 127.0.0.1: `POST /@connections/{id}`
 * answers 200 and records the frame, or, as API Gateway does when the account's rate or a
 * client's buffer is exceeded, 429 `LimitExceededException` and records nothing.
 */
class ManagementStandIn {
  readonly frames = new Map<string, string[]>();
  requests = 0;
  throttled = 0;
  private server: Server | undefined;

  constructor(private readonly throttle: (connectionId: string, request: number) => boolean) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const id = decodeURIComponent(/\/@connections\/([^/?]+)/.exec(req.url ?? '')?.[1] ?? '');
        this.requests++;
        if (this.throttle(id, this.requests)) {
          this.throttled++;
          res.writeHead(429, {
            'content-type': 'application/json',
            'x-amzn-errortype': 'LimitExceededException',
          });
          res.end(JSON.stringify({ message: 'Too Many Requests' }));
          return;
        }
        this.frames.set(id, [...(this.frames.get(id) ?? []), Buffer.concat(chunks).toString()]);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  offsetsOf(connectionId: string): number[] {
    return (this.frames.get(connectionId) ?? []).map(
      (f) => (JSON.parse(f) as { offset: number }).offset,
    );
  }

  async stop(): Promise<void> {
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

let resources: Awaited<ReturnType<typeof testResources>>;
beforeAll(async () => {
  resources = await testResources('throttled');
});
afterAll(() => resources?.dynamodb.destroy());

/** The delivery path on DynamoDB Local, posting through the SDK to the stand-in. */
async function deliveryTo(standIn: ManagementStandIn, subscribers: number, stream: string) {
  const endpoint = await standIn.start();
  const { dynamodb, tables } = resources;
  const store = new DynamoConnectionStore({ client: dynamodb, tableName: tables.connections });
  const sessions = new DynamoSessionCache({ client: dynamodb, tableName: tables.sessions });
  // No retry in the SDK or the adapter: every 429 reaches the fan-out's later passes.
  const api = new ApiGatewayConnectionApi({
    endpoint,
    maxAttempts: 1,
    clientConfig: {
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    },
  });
  const { broker, fanout } = composeDelivery(
    { store, api, sessions, retryBackoffMs: 5 },
    (broadcaster) =>
      new DynamoBroker({ client: dynamodb, historyTable: tables.history, sessions, broadcaster }),
  );
  const ids = Array.from({ length: subscribers }, (_, i) => `${stream}-c${i}`);
  await Promise.all(
    ids.map(async (connectionId) => {
      await store.putConnection({
        connectionId,
        identity: 'alice',
        sid: `sid-${connectionId}`,
        protocol: 'actioncable-v1-ext-json',
        connectedAt: Date.now() - 60_000,
        endpoint,
      });
      await store.addSubscription({ connectionId, stream, identifier: 'id', endpoint });
    }),
  );
  return { broker, fanout, ids, api };
}

describe('fan-out through the SDK to a management API that throttles (HTTP 429)', () => {
  it('delivers every frame to every subscriber once and in order while 20% of posts get 429', async () => {
    const standIn = new ManagementStandIn((_id, request) => request % 5 === 0);
    const t = await deliveryTo(standIn, 200, 'throttled/live');
    try {
      const broadcasts = 10;
      for (let n = 1; n <= broadcasts; n++) {
        await t.broker.handleBroadcast({
          stream: 'throttled/live',
          data: JSON.stringify({ n }),
          meta: { sourceOffset: String(1000 + n) },
        });
      }
      const expected = Array.from({ length: broadcasts }, (_, i) => i + 1);
      for (const id of t.ids) expect(standIn.offsetsOf(id)).toEqual(expected);
      expect(standIn.throttled).toBeGreaterThan(broadcasts * 200 * 0.15);
      expect(t.fanout.takeCounts()).toMatchObject({
        delivered: broadcasts * 200,
        undelivered: 0,
        retried: standIn.throttled,
      });
    } finally {
      t.api.destroy();
      await standIn.stop();
    }
  });

  it('counts a frame undelivered when one client stays throttled, and delivers the rest', async () => {
    const standIn = new ManagementStandIn((id) => id === 'stuck/live-c0');
    const t = await deliveryTo(standIn, 5, 'stuck/live');
    try {
      await t.broker.handleBroadcast({ stream: 'stuck/live', data: '"a"' });
      for (const id of t.ids.slice(1)) expect(standIn.offsetsOf(id)).toEqual([1]);
      expect(standIn.offsetsOf('stuck/live-c0')).toEqual([]);
      // The first post and the default five later passes.
      expect(standIn.throttled).toBe(6);
      expect(t.fanout.takeCounts()).toMatchObject({ delivered: 4, undelivered: 1, retried: 5 });
    } finally {
      t.api.destroy();
      await standIn.stop();
    }
  });
});
