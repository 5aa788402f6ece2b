import { readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cable } from '@anycable/core';
import { type AttributeValue, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { commitDemoBroadcast } from '../../infra/local/demo/demo';
import { freePort, LOCAL_CREDENTIALS, LOCAL_HOST, LOCAL_REGION } from '../../infra/local/services';
import {
  freeStackPorts,
  LOCAL_STAGE,
  type LocalStack,
  startLocalStack,
} from '../../infra/local/stack';
import type { RecordedCall } from '../../lib/adapters/aws/call-log';
import {
  DynamoAckStore,
  DynamoPresenceStore,
  DynamoSchemaRegistry,
  LambdaPingerInvoker,
} from '../../lib/aws';
import {
  AvroCodec,
  ackPartition,
  BROADCAST_TOPIC,
  BroadcastEvent,
  createConnectToken,
  presenceOf,
  signStreamName,
} from '../../lib/core';
import { encodeEnvelope } from '../../lib/messaging/envelope';
import { subscriberSortKey } from '../../lib/realtime/fanout/spread';
import { anycableClients, collect, type Received, until } from '../helpers/cable';
import {
  evaluateRoles,
  functionsOf,
  type IamRequest,
  platformRequests,
  requestsOf,
} from '../helpers/iam';
import { packageService } from '../helpers/package';

const secrets = {
  LAMBDACABLE_JWT_SECRET: 'e2e-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'e2e-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'e2e-broadcast-key-0123456789abcdef0123456789',
  LAMBDACABLE_PUBLIC_STREAMS: 'false',
  LAMBDACABLE_ALLOW_ANONYMOUS: 'false',
  // Low enough that the fan-out test's 20 broadcasts trim the history.
  LAMBDACABLE_HISTORY_LIMIT: '10',
  // Short, so that the presence test sees a dropped connection expire.
  LAMBDACABLE_PRESENCE_TTL: '3',
};
const PREFIX = 'lambdacable-local';
/** Every AWS call the functions make in this run, for the IAM sufficiency test at the end. */
const callLog = join(tmpdir(), `lambdacable-e2e-calls-${process.pid}.jsonl`);

let stack: LocalStack;
let dynamodb: DynamoDBClient;
/** What the functions logged in this run. */
let output = '';
/** The live alarm lines the stack printed (npm start prints them). */
const alarmLines: string[] = [];
/**
 * The port picked first for serverless-offline, held by another listener before serverless-
 * offline can listen on it (what happened in CI): the stack starts on ports picked again.
 */
let taken: Server;
const picked: number[] = [];

beforeAll(async () => {
  await rm(callLog, { force: true });
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, LOCAL_HOST, resolve));
  stack = await startLocalStack({
    ...freeStackPorts(),
    pickPort: async () => {
      const port = picked.length === 0 ? (taken.address() as AddressInfo).port : await freePort();
      picked.push(port);
      return port;
    },
    // A task of one subscriber: every broadcast to two or more goes through deliver tasks, so
    // the suite runs the large-audience path (the capacity test runs the inline one).
    env: { ...secrets, LAMBDACABLE_AWS_CALL_LOG: callLog, LAMBDACABLE_FANOUT_TASK_SIZE: '1' },
    // Your own consumer, as declared in infra/deploy/consumers.ts: its test is below.
    exampleConsumer: true,
    onOutput: (text) => {
      output += text;
    },
    onAlarm: (line) => alarmLines.push(line),
    output: 'quiet',
    watch: false,
  });
  clients = anycableClients(stack.wsUrl);
  dynamodb = new DynamoDBClient({
    endpoint: stack.dynamodbEndpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
}, 240_000);

afterAll(async () => {
  // What the functions logged, for a failure's post-mortem (CI keeps only the test's output).
  const keep = process.env.LAMBDACABLE_E2E_OUTPUT;
  if (keep) await writeFile(keep, output);
  clients?.disconnectAll();
  dynamodb?.destroy();
  await stack?.stop();
  taken?.close();
  await rm(callLog, { force: true });
}, 60_000);

describe('ports', () => {
  it('starts on ports picked again when another process took the one picked first', () => {
    const takenPort = (taken.address() as AddressInfo).port;
    // ws, http, lambda; then the three again.
    expect(picked).toHaveLength(6);
    expect(picked[0]).toBe(takenPort);
    const ws = Number(new URL(stack.wsUrl).port);
    const http = Number(new URL(stack.httpUrl).port);
    expect([ws, http]).toEqual(picked.slice(3, 5));
    expect(ws).not.toBe(takenPort);
    // The functions are told the ports serverless-offline listens on, not the taken one.
    expect(stack.env.LAMBDACABLE_MANAGEMENT_ENDPOINT).toBe(`http://${LOCAL_HOST}:${ws}`);
    expect(stack.env.LAMBDACABLE_LAMBDA_ENDPOINT).toBe(`http://${LOCAL_HOST}:${picked[5]}`);
  });
});

let clients: ReturnType<typeof anycableClients>;
const cable = (token: string | undefined, options: Record<string, unknown> = {}): Cable =>
  clients.cable(token, options);

const token = (sub: string) =>
  createConnectToken({ sub, ttlSeconds: 600 }, secrets.LAMBDACABLE_JWT_SECRET);
const signed = (stream: string) => signStreamName(stream, secrets.LAMBDACABLE_STREAMS_SECRET);
const publish = (stream: string, data: string, fail = false) =>
  commitDemoBroadcast({ dynamodb, prefix: PREFIX, stream, data, fail });

describe('lambdacable end to end (serverless-offline, DynamoDB Local, fauxqs, @anycable/core)', () => {
  it('welcomes a client with a valid JWT, confirms a signed stream and delivers a committed event with epoch and offset; a cancelled one never arrives', async () => {
    const c = cable(await token('alice'));
    await c.connect();
    expect(c.sessionId).toBeTruthy();
    const channel = c.streamFromSigned(signed('orders/1'));
    const got = collect(channel);
    await channel.ensureSubscribed();

    expect((await publish('orders/1', JSON.stringify({ n: 1 }))).committed).toBe(true);
    await until(() => got.messages.length >= 1, 20_000, 'the committed broadcast');
    expect(got.messages).toEqual([{ n: 1 }]);
    const position = (c.protocol as unknown as { streamsPositions: Record<string, unknown> })
      .streamsPositions['orders/1'];
    expect(position).toMatchObject({ epoch: expect.any(String), offset: 1 });

    expect((await publish('orders/1', JSON.stringify({ n: 'never' }), true)).committed).toBe(false);
    expect((await publish('orders/1', JSON.stringify({ n: 2 }))).committed).toBe(true);
    await until(() => got.messages.length >= 2, 20_000, 'the second broadcast');
    expect(got.messages).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('restores the session after a reconnect and replays exactly the missed messages, in order, then live ones', async () => {
    const c = cable(await token('bob'));
    await c.connect();
    const channel = c.streamFromSigned(signed('chat/restore'));
    const got = collect(channel);
    await channel.ensureSubscribed();
    await publish('chat/restore', JSON.stringify({ m: 0 }));
    await until(() => got.messages.length === 1, 20_000, 'the first message');

    const restored: string[][] = [];
    c.on('connect', (event: { restored?: boolean }) => {
      if (event.restored) restored.push([]);
    });
    c.disconnect();
    for (let m = 1; m <= 3; m++) await publish('chat/restore', JSON.stringify({ m }));
    // Let the broadcasts go through the relay and the consumer while the client is away.
    await new Promise((r) => setTimeout(r, 3_000));
    await c.connect();
    await until(() => got.messages.length >= 4, 20_000, 'the missed messages');
    await publish('chat/restore', JSON.stringify({ m: 4 }));
    await until(() => got.messages.length >= 5, 20_000, 'the live message');
    await new Promise((r) => setTimeout(r, 500));
    expect(got.messages).toEqual([{ m: 0 }, { m: 1 }, { m: 2 }, { m: 3 }, { m: 4 }]);
    expect(restored).toHaveLength(1);
  });

  it('rejects a forged signed stream and disconnects a bad JWT as unauthorized', async () => {
    const c = cable(await token('carol'));
    await c.connect();
    const forged = c.streamFromSigned(`${signed('secret').split('--')[0]}--${'0'.repeat(64)}`);
    await expect(forged.ensureSubscribed()).rejects.toThrow();

    const frames = await rawFrames(`${stack.wsUrl}?jid=not-a-token`, 1);
    expect(frames[0]).toEqual({ type: 'disconnect', reason: 'unauthorized', reconnect: false });
  });

  it('accepts an HTTP broadcast with the key (delivered) and refuses one without it (401) or malformed (422)', async () => {
    const c = cable(await token('dave'));
    await c.connect();
    const channel = c.streamFromSigned(signed('http/1'));
    const got = collect(channel);
    await channel.ensureSubscribed();
    const post = (body: string, key?: string) =>
      fetch(`${stack.httpUrl}/_broadcast`, {
        method: 'POST',
        headers: key ? { authorization: `Bearer ${key}` } : {},
        body,
      });
    const body = JSON.stringify({ stream: 'http/1', data: JSON.stringify({ via: 'http' }) });
    expect((await post(body)).status).toBe(401);
    expect((await post(body, 'wrong')).status).toBe(401);
    expect((await post('{"stream":', secrets.LAMBDACABLE_BROADCAST_KEY)).status).toBe(422);
    expect((await post(body, secrets.LAMBDACABLE_BROADCAST_KEY)).status).toBe(201);
    await until(() => got.messages.length >= 1, 20_000, 'the HTTP broadcast');
    expect(got.messages).toEqual([{ via: 'http' }]);
  });

  it('disconnects every connection of an identity on a remote command sent through the broadcast API, and no broadcast committed after it reaches them', async () => {
    const frames = framesFor(`${stack.wsUrl}?jid=${await token('gina')}`, 12_000);
    const c = cable(await token('gina'));
    // A `disconnect` with `reconnect: false` closes the stock client (its `close` event).
    const disconnects: unknown[] = [];
    c.on('close', (event: unknown) => {
      disconnects.push(event);
    });
    await c.connect();
    const channel = c.streamFromSigned(signed('kick/1'));
    const got = collect(channel);
    await channel.ensureSubscribed();
    await publish('kick/1', JSON.stringify({ n: 'before' }));
    await until(() => got.messages.length >= 1, 20_000, 'the broadcast before the kick');
    // The kick and a broadcast in one request: the broadcast is committed after the kick.
    const response = await fetch(`${stack.httpUrl}/_broadcast`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.LAMBDACABLE_BROADCAST_KEY}` },
      body: JSON.stringify([
        { command: 'disconnect', payload: { identity: 'gina', reconnect: false } },
        { stream: 'kick/1', data: JSON.stringify({ n: 'after' }) },
      ]),
    });
    expect(response.status).toBe(201);
    await until(() => disconnects.length >= 1, 20_000, 'the remote disconnect');
    const got2 = (await frames).filter((f) => (f as { type?: string }).type !== 'ping');
    expect(got2).toEqual([
      { type: 'welcome', sid: expect.any(String) },
      { type: 'disconnect', reason: 'remote', reconnect: false },
    ]);
    expect(got.messages).toEqual([{ n: 'before' }]);
    expect(disconnects).toEqual([expect.objectContaining({ reason: 'remote' })]);
    // The order comes from the request's write: a targeted unsubscribe of gina's stream,
    // keyed by it, committed before the kick (the local consumer is quick enough that the
    // frames above would look the same without it).
    const unsubscribed = output
      .split('\n')
      .filter((l) => l.includes('"message":"remote unsubscribe"') && l.includes('"gina"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(unsubscribed).toEqual([
      expect.objectContaining({ stream: 'kick/1', identity: 'gina', subscriptions: 1 }),
    ]);
  });

  it('answers bad frames with a rejection and keeps the connection working', async () => {
    const ws = new WebSocket(
      `${stack.wsUrl}?jid=${await token('hank')}`,
      'actioncable-v1-ext-json',
    );
    const frames: Record<string, unknown>[] = [];
    ws.on('message', (data) => frames.push(JSON.parse(String(data))));
    await until(() => frames.some((f) => f.type === 'welcome'), 15_000, 'welcome');
    const forged = JSON.stringify({ channel: '$pubsub', signed_stream_name: 'Im5vIg==--00' });
    const good = JSON.stringify({ channel: '$pubsub', signed_stream_name: signed('bad/1') });
    // Frames are handled concurrently (one invocation each): every bad frame names an
    // identifier of its own, so the answers do not depend on their order.
    const never = JSON.stringify({ channel: '$pubsub', signed_stream_name: signed('bad/never') });
    ws.send('this is not json');
    ws.send(JSON.stringify({ command: 'dance', identifier: never }));
    ws.send(JSON.stringify({ command: 'message', identifier: never, data: '{}' }));
    ws.send(JSON.stringify({ command: 'subscribe', identifier: forged }));
    ws.send(JSON.stringify({ command: 'history', identifier: never, history: { since: 0 } }));
    ws.send(JSON.stringify({ command: 'subscribe', identifier: 'x'.repeat(40_000) }));
    ws.send(JSON.stringify({ command: 'subscribe', identifier: good }));
    await until(
      () => frames.some((f) => f.type === 'confirm_subscription' && f.identifier === good),
      15_000,
      'the good subscription',
    );
    await until(() => frames.some((f) => f.type === 'reject_subscription'), 15_000, 'reject');
    await until(() => frames.some((f) => f.type === 'reject_history'), 15_000, 'reject_history');
    expect(frames).toContainEqual({ type: 'reject_subscription', identifier: forged });
    expect(frames).toContainEqual({ type: 'reject_history', identifier: never });
    await publish('bad/1', JSON.stringify({ still: 'working' }));
    await until(() => frames.some((f) => f.stream_id === 'bad/1'), 20_000, 'the broadcast');
    ws.close();
  });

  it('keeps clients with the default monitor connected through server pings', async () => {
    const c = cable(await token('erin'), { monitor: undefined });
    const disconnects: unknown[] = [];
    c.on('disconnect', (event: unknown) => {
      disconnects.push(event);
    });
    await c.connect();
    // Longer than the monitor's 6 s stale threshold.
    const frames = await framesFor(`${stack.wsUrl}?jid=${await token('frank')}`, 8_000);
    const pings = frames.filter((f) => (f as { type?: string }).type === 'ping');
    expect(pings.length).toBeGreaterThanOrEqual(2);
    expect(pings[0]).toEqual({ type: 'ping', message: expect.any(Number) });
    expect(disconnects).toEqual([]);
    expect(c.state).toBe('connected');
  });

  it('pings a client at the interval it chose with `pi`, and spares a client whose stream gets broadcasts', async () => {
    const typeOf = (f: unknown) => (f as { type?: string }).type;
    // A subscribed @anycable/core client on a stream that gets a broadcast every second.
    const busy = cable(await token('ivan'));
    await busy.connect();
    const channel = busy.streamFromSigned(signed('busy/1'));
    const got = collect(channel);
    await channel.ensureSubscribed();
    const pingsOfBusy: unknown[] = [];
    // Every frame is a keepalive to the client; a ping's carries its time.
    busy.on('keepalive', (msg: unknown) => {
      if (msg !== undefined) pingsOfBusy.push(msg);
    });
    let broadcasting = true;
    const broadcasts = (async () => {
      for (let n = 0; broadcasting; n++) {
        const res = await fetch(`${stack.httpUrl}/_broadcast`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secrets.LAMBDACABLE_BROADCAST_KEY}` },
          body: JSON.stringify({ stream: 'busy/1', data: JSON.stringify({ n }) }),
        });
        expect(res.status).toBe(201);
        await new Promise((r) => setTimeout(r, 1_000));
      }
    })();
    await until(() => got.messages.length >= 1, 20_000, 'the first busy broadcast');
    pingsOfBusy.length = 0;
    const [slow, idle] = await Promise.all([
      framesFor(`${stack.wsUrl}?jid=${await token('gina')}&pi=30`, 9_000),
      framesFor(`${stack.wsUrl}?jid=${await token('hank')}`, 9_000),
    ]);
    broadcasting = false;
    await broadcasts;
    expect(slow.map(typeOf)).toEqual(['welcome']);
    expect(idle.filter((f) => typeOf(f) === 'ping').length).toBeGreaterThanOrEqual(2);
    // About 3 pings in 9 s without the broadcasts; a slow broadcast may let one through.
    expect(got.messages.length).toBeGreaterThanOrEqual(6);
    expect(pingsOfBusy.length).toBeLessThanOrEqual(1);
    expect(busy.state).toBe('connected');
  });

  it('fans each of 20 broadcasts out to 200 clients, and removes a vanished connection on its first 410', async () => {
    const stream = 'fanout/1';
    const n = 200;
    // Clients join in waves: this test is about the fan-out; 200 simultaneous handshakes
    // are test/e2e/capacity.test.ts's.
    const receivers: Received[] = [];
    for (let wave = 0; wave < n; wave += 20) {
      receivers.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(20, n - wave) }, async (_, i) => {
            const c = cable(await token(`user-${wave + i}`));
            await c.connect();
            const channel = c.streamFromSigned(signed(stream));
            const got = collect(channel);
            await channel.ensureSubscribed();
            return got;
          }),
        )),
      );
    }
    expect(receivers).toHaveLength(n);
    // A connection API Gateway no longer knows (closed without $disconnect).
    const ghost = 'ghost-connection';
    const table = stack.resources.tables.connections;
    await dynamodb.send(
      new PutItemCommand({ TableName: table, Item: ghostSubscription(ghost, stream) }),
    );
    await dynamodb.send(
      new PutItemCommand({
        TableName: table,
        // No bucket: the pinger (which lists connections by bucket) must not find it
        // first; this test is about the fan-out's 410 handling.
        Item: ghostConnection(ghost, 'ghost'),
      }),
    );
    for (let i = 0; i < 20; i++) await publish(stream, JSON.stringify({ i }));
    await until(
      () => receivers.every((c) => c.messages.length >= 20),
      90_000,
      'every client to get 20 broadcasts',
    );
    const expected = Array.from({ length: 20 }, (_, i) => ({ i }));
    for (const c of receivers) expect(c.messages).toEqual(expected);
    const { GetItemCommand } = await import('@aws-sdk/client-dynamodb');
    const left = await dynamodb.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: `c#${ghost}` }, sk: { S: 'c' } } }),
    );
    expect(left.Item).toBeUndefined();
  }, 180_000);

  it("starts a pinger partition's run with an asynchronous invoke (202), and the run reports after its first read", async () => {
    const lambda = new LambdaClient({
      endpoint: stack.env.LAMBDACABLE_LAMBDA_ENDPOINT,
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
    });
    try {
      // What the coordinator does for partitions 1..K-1 (here K = 2 of the 8 buckets).
      await new LambdaPingerInvoker({
        client: lambda,
        functionName: 'lambdacable-local-pinger',
      }).start({ partition: 1, partitions: 2, buckets: 8 });
    } finally {
      lambda.destroy();
    }
    const { GetItemCommand } = await import('@aws-sdk/client-dynamodb');
    const table = stack.resources.tables.connections;
    const reported = async () =>
      (
        await dynamodb.send(
          new GetItemCommand({
            TableName: table,
            Key: { pk: { S: 'pinger' }, sk: { S: 'run#1' } },
            ConsistentRead: true,
          }),
        )
      ).Item;
    await expect.poll(reported, { timeout: 30_000, interval: 250 }).toBeDefined();
    const item = await reported();
    expect(item?.partitions?.N).toBe('2');
    expect(item?.partition?.N).toBe('1');
  }, 60_000);
});

/** Opens a raw socket with the extended subprotocol and returns its first `count` frames. */
async function rawFrames(url: string, count: number): Promise<unknown[]> {
  const frames = await framesFor(url, 15_000, count);
  if (frames.length < count) throw new Error(`got ${frames.length} of ${count} frames`);
  return frames;
}

/**
 * Opens a raw socket with the extended subprotocol and returns the frames it got within
 * `ms` ms, or its first `count` frames as soon as they are in.
 */
function framesFor(url: string, ms: number, count = Number.POSITIVE_INFINITY): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, 'actioncable-v1-ext-json');
    const frames: unknown[] = [];
    const done = () => {
      clearTimeout(timer);
      ws.close();
      resolve(frames);
    };
    const timer = setTimeout(done, ms);
    ws.on('message', (data) => {
      frames.push(JSON.parse(String(data)));
      if (frames.length >= count) done();
    });
    ws.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/**
 * Grants the tests above do not reach, each for a path that exists in the code: the IAM
 * test allows these to stay unused and fails on any other unused grant.
 */
/** Why the secrets' parameters go unread here. */
const SECRETS_READ =
  'npm start hands the functions the secret values; test/unit/adapters/aws/secrets.test.ts reads parameters';

const NOT_EXERCISED: Readonly<Record<string, string>> = {
  'wsConnect ssm:GetParameter parameter/lambdacable/local/jwt-secret': SECRETS_READ,
  'wsConnect ssm:GetParameter parameter/lambdacable/local/jwt-secret-previous': SECRETS_READ,
  'wsConnect ssm:GetParameter parameter/lambdacable/local/streams-secret': SECRETS_READ,
  'wsConnect ssm:GetParameter parameter/lambdacable/local/streams-secret-previous': SECRETS_READ,
  'wsDefault ssm:GetParameter parameter/lambdacable/local/streams-secret': SECRETS_READ,
  'wsDefault ssm:GetParameter parameter/lambdacable/local/streams-secret-previous': SECRETS_READ,
  'httpBroadcast ssm:GetParameter parameter/lambdacable/local/broadcast-key': SECRETS_READ,
  'httpBroadcast ssm:GetParameter parameter/lambdacable/local/broadcast-key-previous': SECRETS_READ,
  'broadcast sqs:ChangeMessageVisibility lambdacable-local-broadcast.fifo':
    'nack back-off and visibility heartbeats (test/integration/consumers.test.ts)',
  'broadcast sqs:SendMessage lambdacable-local-broadcast-dlq.fifo':
    'a poison message parked in the DLQ at once (test/integration/poison.test.ts)',
  'broadcast dynamodb:Query table/lambdacable-local-history':
    'a redelivery older than the last appended: a duplicate, or a redriven message',
  'broadcast dynamodb:DeleteItem table/lambdacable-local-connections':
    'the remote unsubscribe command removes subscriptions',
  'wsDefault dynamodb:DeleteItem table/lambdacable-local-connections': 'an unsubscribe frame',
  'wsDefault dynamodb:UpdateItem table/lambdacable-local-connections':
    'an unsubscribe frame marks the connection changed for the pinger',
  'broadcast dynamodb:UpdateItem table/lambdacable-local-connections':
    'the remote unsubscribe command marks the connections changed for the pinger',
  'wsDefault dynamodb:Query table/lambdacable-local-connections/index/byStreamShard':
    'a whisper reaches the other subscribers',
  'pinger dynamodb:GetItem table/lambdacable-local-connections':
    'a ping answered 410 disconnects the connection',
  'pinger dynamodb:Query table/lambdacable-local-connections':
    'a ping answered 410 disconnects the connection',
  'pinger dynamodb:BatchWriteItem table/lambdacable-local-connections':
    'a ping answered 410 disconnects the connection',
  'pinger lambda:InvokeFunction function:lambdacable-local-pinger':
    'the coordinator starts other partitions only past LAMBDACABLE_PINGER_PARTITION_RATE (test/unit/realtime/keepalive/partitions.test.ts); the same Invoke, from the test, starts a partition above',
  'pinger dynamodb:UpdateItem table/lambdacable-local-sessions':
    'a ping answered 410 finishes the session',
  'broadcast dynamodb:GetItem table/lambdacable-local-sessions':
    'a broadcast delivered inline answered 410: the session stores what the connection held (read, then a conditional put)',
  'broadcast dynamodb:PutItem table/lambdacable-local-sessions':
    'a broadcast delivered inline answered 410: the session stores what the connection held (read, then a conditional put)',
  'deliver dynamodb:PutItem table/lambdacable-local-sessions':
    "a fan-out task answered 410 by a connection whose session is still live stores its subscriptions in it (here the vanished client's was not read live; test/contract/sessions.ts closes sessions on DynamoDB Local)",
  'deliver dynamodb:DeleteItem table/lambdacable-local-connections':
    'a remote unsubscribe of a stream larger than one task removes subscriptions in fan-out tasks (test/unit/realtime/fanout/tasks.test.ts)',
  'deliver dynamodb:UpdateItem table/lambdacable-local-connections':
    "a remote unsubscribe in fan-out tasks lowers the connections' counts and marks them changed",
  'wsDefault dynamodb:GetItem table/lambdacable-local-sessions':
    'a whisper answered 410 closes the session with what the connection held',
  'wsDefault dynamodb:PutItem table/lambdacable-local-sessions':
    'a whisper answered 410 closes the session with what the connection held',
  'audit sqs:ChangeMessageVisibility lambdacable-local-audit.fifo':
    "a transient failure's redelivery back-off (test/integration/poison.test.ts); the poison message here is parked at once",
  'broadcast dynamodb:UpdateItem table/lambdacable-local-sessions':
    'a broadcast delivered inline (a stream within one task; here every task is one subscriber) answered 410 finishes the session',
  // Here every stream of two or more subscribers is delivered by tasks (a task of one), so the
  // broadcast consumer meets a 410 only when a one-subscriber stream's client has just gone.
  'broadcast dynamodb:GetItem table/lambdacable-local-connections':
    'a broadcast delivered inline answered 410: the connection read (the ghost test, by tasks here)',
  'broadcast dynamodb:Query table/lambdacable-local-connections':
    'a broadcast delivered inline answered 410: its subscriptions read to remove them',
  'broadcast dynamodb:BatchWriteItem table/lambdacable-local-connections':
    'a broadcast delivered inline answered 410: the connection removed',
  'wsConnect dynamodb:UpdateItem table/lambdacable-local-connections':
    'a restored subscription whose write meets a hot shard spreads the stream (test/integration/stream-spread.test.ts)',
  'wsDefault dynamodb:BatchWriteItem table/lambdacable-local-connections':
    'a whisper answered 410 disconnects the connection',
  'wsDefault dynamodb:UpdateItem table/lambdacable-local-sessions':
    'a whisper answered 410 finishes the session',
  'httpBroadcast dynamodb:PutItem table/lambdacable-local-idempotency':
    'a POST /_broadcast with an Idempotency-Key (test/integration/broadcast-idempotency.test.ts)',
  'httpBroadcast dynamodb:UpdateItem table/lambdacable-local-idempotency':
    'a POST /_broadcast with an Idempotency-Key completes its record',
  'httpBroadcast dynamodb:GetItem table/lambdacable-local-idempotency':
    'a repeated Idempotency-Key whose conditional put returned no record (Powertools reads it)',
  'wsDefault dynamodb:ConditionCheckItem table/lambdacable-local-connections':
    'a repeated join of a connection with the id it is present with only changes the info (test/contract/presence.ts); the stock client sends a join once per subscription',
  'broadcast dynamodb:PutItem table/lambdacable-local-connections':
    "a present member's connection answering 410 to a broadcast delivered inline: its presence dropped, a departure put (here the 410 is met by a fan-out task)",
  'httpBroadcast dynamodb:DeleteItem table/lambdacable-local-idempotency':
    'a POST /_broadcast with an Idempotency-Key whose write failed: its record is deleted',
};

/** A presence frame's `message`, as `channel.on('presence')` hands it over. */
interface PresenceMessage {
  readonly type?: string;
  readonly id?: string;
  readonly info?: unknown;
  readonly total?: number;
  readonly records?: readonly { id: string; info?: unknown }[];
}

describe('presence with the stock client (channel.presence: join, leave, info; docs/presence.md)', () => {
  const TTL_MS = Number(secrets.LAMBDACABLE_PRESENCE_TTL) * 1000;
  /** A stock client subscribed to `stream`, with every presence event its channel gets. */
  async function member(sub: string, stream: string) {
    const c = cable(await token(sub));
    await within(c.connect(), `${sub}'s connect`);
    const channel = c.streamFromSigned(signed(stream));
    const events: PresenceMessage[] = [];
    channel.on('presence', (msg: PresenceMessage) => {
      if (msg.type === 'join' || msg.type === 'leave') events.push(msg);
    });
    await within(channel.ensureSubscribed(), `${sub}'s subscribe`);
    // The raw `info` reply, as the stock client's `presence.info()` gets it before its state.
    const performer = channel as unknown as { perform(a: string, p: object): Promise<unknown> };
    const info = (when = '') =>
      within(
        performer.perform('$presence:info', {}) as Promise<PresenceMessage>,
        `${sub}'s info${when ? ` ${when}` : ''}`,
      );
    return { c, channel, events, info };
  }
  /** `promise`, or a failure naming `what` after 20 s: a stuck step says which it is. */
  function within<T>(promise: Promise<T>, what: string, ms = 20_000): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }
  /** The functions' last log lines about presence, failures and (dis)connects. */
  function presenceLog(): string {
    const lines = output
      .split('\n')
      .filter((l) =>
        /"level":"(WARN|ERROR)"|"message":"(presence|disconnected|fan-out tasks)/.test(l),
      );
    return lines.slice(-40).join('\n');
  }
  /** Waits until `events` holds `n`, then a moment more: nothing else may come. */
  async function settled(events: PresenceMessage[], n: number, ms = 1_500) {
    // 90 s: an event whose broadcast message is redelivered (a backoff of 2, 4, 8, 16 s, or
    // the local queues' 60 s visibility timeout after a timed-out invocation) still comes:
    // delivery is asserted, not its latency. A failure says what came, and what the functions
    // logged about presence.
    await until(() => events.length >= n, 90_000, `${n} presence events`).catch((error) => {
      throw new Error(
        `${(error as Error).message}; got ${JSON.stringify(events)}; functions:\n${presenceLog()}`,
      );
    });
    await new Promise((r) => setTimeout(r, ms));
    return events.slice();
  }

  it('two clients join and both see it, info lists them, a second session of an id and its leave are silent, the last leave is seen', async () => {
    const stream = 'room/presence';
    const alice = await member('alice', stream);
    const bob = await member('bob', stream);
    await alice.channel.presence.join('alice', { name: 'Alice' });
    const aliceJoined = { type: 'join', id: 'alice', info: { name: 'Alice' } };
    await until(() => bob.events.length >= 1, 90_000, "bob sees alice's join");
    await bob.channel.presence.join('bob', { name: 'Bob' });
    const bobJoined = { type: 'join', id: 'bob', info: { name: 'Bob' } };
    expect(await settled(alice.events, 2)).toEqual([aliceJoined, bobJoined]);
    expect(await settled(bob.events, 2, 0)).toEqual([aliceJoined, bobJoined]);

    // The raw reply of `presence`, then the stock client's own state from it.
    expect(await bob.info()).toEqual({
      type: 'info',
      total: 2,
      records: [
        { id: 'alice', info: { name: 'Alice' } },
        { id: 'bob', info: { name: 'Bob' } },
      ],
    });
    expect(await alice.channel.presence.info()).toEqual({
      alice: { name: 'Alice' },
      bob: { name: 'Bob' },
    });

    // Alice on a second tab: the id is present already, so no one sees a join; its leave is
    // not her last, so no one sees a leave.
    const tab = await member('alice', stream);
    await tab.channel.presence.join('alice', { name: 'Alice' });
    await expect.poll(async () => (await bob.info()).total).toBe(2);
    await tab.channel.presence.leave();
    tab.c.disconnect();
    expect(await settled(bob.events, 2)).toEqual([aliceJoined, bobJoined]);

    // Her last session leaves: everyone subscribed sees it, and info no longer lists her.
    await alice.channel.presence.leave();
    const aliceLeft = { type: 'leave', id: 'alice' };
    expect(await settled(bob.events, 3)).toEqual([aliceJoined, bobJoined, aliceLeft]);
    expect(await settled(alice.events, 3, 0)).toEqual([aliceJoined, bobJoined, aliceLeft]);
    expect(await alice.channel.presence.info()).toEqual({ bob: { name: 'Bob' } });
    expect(await bob.info()).toEqual({
      type: 'info',
      total: 1,
      records: [{ id: 'bob', info: { name: 'Bob' } }],
    });
    alice.c.disconnect();
    bob.c.disconnect();
  }, 240_000);

  it('keeps a session restore present without a second join, and removes a dropped client after LAMBDACABLE_PRESENCE_TTL with a leave', async () => {
    const stream = 'room/presence-ttl';
    const watcher = await member('walt', stream);
    const carol = await member('carol', stream);
    await carol.channel.presence.join('carol', { away: false });
    const carolJoined = { type: 'join', id: 'carol', info: { away: false } };
    expect(await settled(watcher.events, 1)).toEqual([carolJoined]);

    // A reconnect restores the session; the client sends its join again on the new
    // connection. The old connection's session outlives the TTL as one of two: no leave.
    const restored: boolean[] = [];
    carol.c.on('connect', (event: { restored?: boolean }) => {
      restored.push(Boolean(event.restored));
    });
    carol.c.disconnect();
    await within(carol.c.connect(), "carol's reconnect");
    expect(restored).toEqual([true]);
    await new Promise((r) => setTimeout(r, TTL_MS + 3_000));
    expect(watcher.events).toEqual([carolJoined]);
    expect((await watcher.info('after the restore')).records).toEqual([
      { id: 'carol', info: { away: false } },
    ]);

    // Gone without a leave: present for the TTL, then a leave, with no one acting on the stream.
    const dropped = Date.now();
    carol.c.disconnect();
    await new Promise((r) => setTimeout(r, TTL_MS / 2));
    expect((await watcher.info('while carol is dropped')).total).toBe(1);
    await until(() => watcher.events.length >= 2, 90_000, "carol's leave");
    expect(Date.now() - dropped).toBeGreaterThanOrEqual(TTL_MS);
    expect(await settled(watcher.events, 2)).toEqual([carolJoined, { type: 'leave', id: 'carol' }]);
    expect(await watcher.info('after carol left')).toEqual({ type: 'info', total: 0, records: [] });
    watcher.c.disconnect();
  }, 240_000);

  it('removes the presence of the subscriptions a remote unsubscribe removes, inline and in fan-out tasks', async () => {
    const presence = new DynamoPresenceStore({
      client: dynamodb,
      tableName: stack.resources.tables.connections,
    });
    // One subscriber: the broadcast consumer removes it inline; two: fan-out tasks (a task of
    // one subscriber here) remove them.
    const alone = await member('dave', 'room/revoked-1');
    const pair = [await member('erin', 'room/revoked-2'), await member('fred', 'room/revoked-2')];
    await alone.channel.presence.join('dave', {});
    await pair[0]!.channel.presence.join('erin', {});
    await pair[1]!.channel.presence.join('fred', {});
    await until(() => pair[0]!.events.length >= 2, 90_000, 'both joins');
    expect((await presenceOf(presence, 'room/revoked-1')).total).toBe(1);
    expect((await presenceOf(presence, 'room/revoked-2')).total).toBe(2);

    const response = await fetch(`${stack.httpUrl}/_broadcast`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.LAMBDACABLE_BROADCAST_KEY}` },
      body: JSON.stringify(
        ['room/revoked-1', 'room/revoked-2'].map((stream) => ({
          command: 'unsubscribe',
          payload: { stream },
        })),
      ),
    });
    expect(response.status).toBe(201);
    for (const stream of ['room/revoked-1', 'room/revoked-2']) {
      await expect
        .poll(async () => (await presenceOf(presence, stream)).total, { timeout: 20_000 })
        .toBe(0);
    }
    for (const m of [alone, ...pair]) m.c.disconnect();
  }, 240_000);

  it('gives a member whose connection vanished (410 to a fan-out task) a leave after the TTL', async () => {
    const stream = 'room/presence-ghost';
    const watcher = await member('gail', stream);
    // A connection API Gateway no longer knows, subscribed and present as `ghost`.
    const ghost = 'presence-ghost-connection';
    const table = stack.resources.tables.connections;
    const items: Record<string, AttributeValue>[] = [
      ghostSubscription(ghost, stream),
      ghostConnection(ghost, 'presence-ghost'),
    ];
    for (const Item of items) {
      await dynamodb.send(new PutItemCommand({ TableName: table, Item }));
    }
    const presence = new DynamoPresenceStore({ client: dynamodb, tableName: table });
    await presence.join(stream, ghost, 'ghost', { seen: 'never' }, Date.now());
    expect((await watcher.info()).total).toBe(1);

    // A broadcast to the stream's two subscribers: the ghost's task meets its 410.
    const got = collect(watcher.channel);
    const posted = Date.now();
    await publish(stream, JSON.stringify({ hello: 'room' }));
    await until(() => got.messages.length >= 1, 20_000, 'the broadcast');
    await until(() => watcher.events.length >= 1, 90_000, "the ghost's leave");
    expect(Date.now() - posted).toBeGreaterThanOrEqual(TTL_MS);
    expect(await settled(watcher.events, 1)).toEqual([{ type: 'leave', id: 'ghost' }]);
    expect(await watcher.info('after carol left')).toEqual({ type: 'info', total: 0, records: [] });
    watcher.c.disconnect();
  }, 240_000);
});

describe('your own consumer (the example group `audit`, infra/deploy/consumers.ts)', () => {
  it('gets every broadcast from its own queue, and keeps its ack state across a redelivery', async () => {
    const stream = `audit/${Date.now()}`;
    const response = await fetch(`${stack.httpUrl}/_broadcast`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.LAMBDACABLE_BROADCAST_KEY}` },
      body: JSON.stringify({ stream, data: JSON.stringify({ audited: true }) }),
    });
    expect(response.status).toBe(201);
    const lines = () =>
      output
        .split('\n')
        .filter((l) => l.includes('"audit broadcast"') && l.includes(`"stream":"${stream}"`))
        .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>);
    await expect.poll(() => lines().length, { timeout: 30_000, interval: 250 }).toBe(1);
    const [entry] = lines();
    const partition = String(entry!.partition);
    const offset = BigInt(String(entry!.offset));
    // Its ack state is in the acks table, per topic and partition: the level is the handled offset.
    const acks = new DynamoAckStore({ client: dynamodb, tableName: stack.resources.tables.acks });
    const ackKey = ackPartition(BROADCAST_TOPIC, partition);
    await expect.poll(() => acks.load('audit', ackKey), { timeout: 10_000 }).toBe(offset);

    // The same message again, as SQS would hand it out after a relay resend past its
    // 5-minute deduplication window: the ack state acks it without a second audit line.
    const queue = stack.resources.queues.audit!;
    const body = encodeEnvelope(
      {
        id: String(entry!.id),
        topic: BROADCAST_TOPIC,
        key: partition,
        type: BroadcastEvent.name,
        headers: {},
        payload: await new AvroCodec(
          new DynamoSchemaRegistry({ client: dynamodb, tableName: stack.resources.tables.schemas }),
        ).encode(BroadcastEvent, { stream, data: JSON.stringify({ audited: true }) }),
        timestamp: Date.now(),
      },
      offset,
    );
    const sqs = new SQSClient({
      endpoint: stack.sqsEndpoint,
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
    });
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queue.url,
          MessageBody: body,
          MessageGroupId: partition,
          MessageDeduplicationId: `redelivery-${entry!.id}`,
        }),
      );
      // Consumed (the queue drains) without the handler: still one line.
      const depth = async () => {
        const out = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: queue.url,
            AttributeNames: [
              'ApproximateNumberOfMessages',
              'ApproximateNumberOfMessagesNotVisible',
            ],
          }),
        );
        return (
          Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) +
          Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
        );
      };
      await expect.poll(depth, { timeout: 20_000, interval: 250 }).toBe(0);
      expect(lines()).toHaveLength(1);
      expect(await acks.load('audit', ackKey)).toBe(offset);
    } finally {
      sqs.destroy();
    }
  }, 60_000);
});

describe('the local equivalents of the alarms (docs/operations.md)', () => {
  it('prints a live line when a poisoned message lands in a DLQ, and the message is there', async () => {
    const sqs = new SQSClient({
      endpoint: stack.sqsEndpoint,
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
    });
    try {
      const queue = stack.resources.queues.audit!;
      const poison = `poison ${Date.now()}: not a lambdacable envelope`;
      // Not an envelope: poison, parked in the DLQ by the consumer at its first delivery.
      const sent = await sqs.send(
        new SendMessageCommand({
          QueueUrl: queue.url,
          MessageBody: poison,
          MessageGroupId: 'poison',
          MessageDeduplicationId: `poison-${Date.now()}`,
        }),
      );
      const dlq = 'lambdacable-local-audit-dlq.fifo';
      await expect
        .poll(() => alarmLines.filter((l) => l.includes('AuditDlqAlarm')), {
          timeout: 50_000,
          interval: 500,
        })
        .toEqual([`lambdacable ALARM AuditDlqAlarm: 1 message(s) in ${dlq} (docs/operations.md)`]);
      const got = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queue.dlqUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 0,
        }),
      );
      expect(got.Messages?.map((m) => m.Body)).toEqual([poison]);
      // The parking is logged as the runbook's Logs Insights query finds it: a Powertools
      // JSON line with level ERROR and a message matching /parked/ that gives the reason,
      // once: poison is not retried.
      const logged = output
        .split('\n')
        .filter((l) => l.includes('{') && l.includes(String(sent.MessageId)))
        .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as { level?: string; message?: string });
      expect(
        logged.filter((l) => l.level === 'ERROR' && /parked/.test(l.message ?? '')),
      ).toHaveLength(1);
      expect(logged.filter((l) => /nack/.test(l.message ?? ''))).toEqual([]);
      // The metrics lines npm start's alarm lines read (undeliveredFrames the same way): one
      // embedded-metric-format object per line, each metric a top-level number.
      expect(output).toMatch(/^\{"_aws":\{.*"parkedMessages":1[,}]/m);
    } finally {
      sqs.destroy();
    }
  }, 60_000);
});

// Last in this file: it reads the calls every test above made.
describe('IAM roles of the generated template, against every AWS call of this run', () => {
  it('allows every call each function made with its own role, and grants nothing else', async () => {
    const calls = (await readFile(callLog, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as RecordedCall);
    // The stage is the local one, so physical names match those the calls used.
    const packaged = await packageService(LOCAL_STAGE, { LAMBDACABLE_EXAMPLE_CONSUMER: 'true' });
    try {
      const { template } = packaged;
      const fns = functionsOf(template);
      const requests: IamRequest[] = [...platformRequests(template)];
      for (const call of calls) {
        const fn = fns.find((f) => f.name === call.function);
        expect(fn, `a call from an unknown function: ${call.function}`).toBeDefined();
        requests.push(...requestsOf(call, fn!.key));
      }
      // Every function ran and called AWS in this run.
      expect(new Set(calls.map((c) => c.function))).toEqual(new Set(fns.map((f) => f.name)));

      const { denied, unused, evaluated } = await evaluateRoles(template, requests);
      const unusedKeys = unused.map(
        (g) => `${g.function} ${g.action} ${g.resource.split(':').slice(5).join(':')}`,
      );
      console.log(
        `IAM: ${calls.length} calls, ${evaluated} distinct requests; unused grants:\n` +
          unusedKeys.map((k) => `  ${k}: ${NOT_EXERCISED[k] ?? 'NOT JUSTIFIED'}`).join('\n'),
      );
      expect(denied).toEqual([]);
      expect(unusedKeys.filter((k) => !(k in NOT_EXERCISED))).toEqual([]);
    } finally {
      await packaged.remove();
    }
  }, 120_000);
});

/**
 * The subscription item of a connection API Gateway no longer knows (closed without
 * `$disconnect`), identifier `ghost`: in shard 0 of the stream, at its hash, where a
 * subscribe stores it.
 */
function ghostSubscription(ghost: string, stream: string): Record<string, AttributeValue> {
  return {
    pk: { S: `c#${ghost}` },
    sk: { S: `s#${stream}#ghost` },
    connectionId: { S: ghost },
    stream: { S: stream },
    identifier: { S: 'ghost' },
    fanKey: { S: `${stream}#0` },
    fanSort: { S: subscriberSortKey(ghost) },
  };
}

/** The connection item of that ghost: connected long ago, without a pinger bucket. */
function ghostConnection(ghost: string, sid: string): Record<string, AttributeValue> {
  return {
    pk: { S: `c#${ghost}` },
    sk: { S: 'c' },
    connectionId: { S: ghost },
    sid: { S: sid },
    protocol: { S: 'actioncable-v1-ext-json' },
    connectedAt: { N: '0' },
  };
}
