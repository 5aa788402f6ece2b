/**
 * What ordering a connection's frames costs, on the local stack. The ordered path (the
 * `$default` route's SQS integration, the frames FIFO queue, wsDefault's event source mapping)
 * against the path it replaced, measured in the same run: wsDefault invoked once per frame with
 * that frame alone, as API Gateway's Lambda integration invoked it. Timed from the frame sent
 * (over the socket, or as the Invoke) to its answer on the socket: subscribe → confirm, and a
 * whisper → the other subscriber. Then the AWS requests per frame and their list price.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { SQSEvent } from 'aws-lambda';
import { LOCAL_PREFIX } from '../infra/local/environment';
import { sqsEventOf } from '../infra/local/pollers/sqs';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../infra/local/services';
import { DynamoConnectionStore } from '../lib/aws';
import { createConnectToken, signStreamName } from '../lib/core';
import { costOf, PRICES } from './prices';
import { type BenchSecrets, type BenchStack, sleep } from './stack';
import type { Figure } from './util';
import { BenchClient, quantile, signedIdentifier } from './ws-clients';

/** Frames timed one after the other, per path and kind. */
const FRAMES = 100;
/** Connections of the burst that shows the batching, and frames each sends at once. */
const BURST_CONNECTIONS = 20;
const BURST_FRAMES = 10;
const WS_DEFAULT = `${LOCAL_PREFIX}-wsDefault`;

/**
 * The stack's settings this section needs: whispers on its signed stream, and a rate limit its
 * hundreds of frames a connection stay under (still checked on every frame, as by default).
 */
export const FRAME_ORDER_BENCH_ENV = {
  LAMBDACABLE_WHISPER_ON_SIGNED: 'true',
  LAMBDACABLE_RATE_LIMIT: '1000',
  LAMBDACABLE_RATE_BURST: '1000',
};

/** A subscriber of the bench's stream, and that stream's identifier. */
interface Client {
  readonly client: BenchClient;
  readonly identifier: string;
}

/** How a frame reaches wsDefault: sent on the socket, or invoked as the Lambda integration did. */
type Send = (client: BenchClient, frame: object) => Promise<void>;

export async function benchFrameOrder(bench: BenchStack, secrets: BenchSecrets): Promise<Figure[]> {
  const { stack } = bench;
  const lambda = new LambdaClient({
    endpoint: stack.env.LAMBDACABLE_LAMBDA_ENDPOINT,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  const stream = signStreamName('bench/frame-order', secrets.LAMBDACABLE_STREAMS_SECRET);
  const identifier = signedIdentifier(stream);
  const connect = async (sub: string): Promise<Client> => {
    const token = await createConnectToken(
      { sub, ttlSeconds: 600 },
      secrets.LAMBDACABLE_JWT_SECRET,
    );
    const client = await BenchClient.connect(stack.wsUrl, token, 30_000, { pi: '60' });
    await client.subscribe(identifier, 30_000);
    return { client, identifier };
  };
  const sender = await connect('frame-order-sender');
  const receiver = await connect('frame-order-receiver');
  const senderId = await connectionIdOf(bench, 'frame-order-sender');
  const overSocket: Send = async (client, frame) => client.ws.send(JSON.stringify(frame));
  const invoked: Send = async (_client, frame) => {
    await lambda.send(
      new InvokeCommand({
        FunctionName: WS_DEFAULT,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(oneFrameEvent(senderId, frame))),
      }),
    );
  };
  try {
    const before = bench.invocations.length;
    const pollerFrom = bench.pollerLog.mark();
    const sign = (name: string) =>
      signedIdentifier(signStreamName(name, secrets.LAMBDACABLE_STREAMS_SECRET));
    const queued = await timeFrames(sender, receiver, overSocket, sign, 'queued');
    const invocations = bench.invocations
      .slice(before)
      .filter((i) => i.functionName === WS_DEFAULT);
    const pollerCalls = bench.pollerLog
      .between(pollerFrom, bench.pollerLog.mark())
      .filter((c) => c.operation === 'DeleteMessageBatch' && c.function.includes('wsDefault'));
    const direct = await timeFrames(sender, receiver, invoked, sign, 'direct');
    const burst = await burstBatching(bench, secrets);
    return figures({
      queued,
      direct,
      framesSent: 3 * FRAMES,
      invocations: invocations.length,
      deletes: pollerCalls.length,
      burst,
    });
  } finally {
    sender.client.close();
    receiver.client.close();
    lambda.destroy();
  }
}

/** Subscribe → confirm and whisper → the other subscriber, `FRAMES` each, one after another. */
async function timeFrames(
  sender: Client,
  receiver: Client,
  send: Send,
  sign: (stream: string) => string,
  label: string,
): Promise<{ subscribe: number[]; whisper: number[] }> {
  // Fresh streams, each confirmed before the next; unsubscribed together afterwards (an
  // unsubscribe between them would be one more frame each subscribe waits for).
  const subscribe: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < FRAMES; i++) {
    const id = sign(`bench/frame-order/${label}/${i}`);
    ids.push(id);
    const confirmed = sender.client.waitFor(
      (f) => f.type === 'confirm_subscription' && f.identifier === id,
      `the confirm of subscribe ${i} (${label})`,
    );
    const at = performance.now();
    await send(sender.client, { command: 'subscribe', identifier: id });
    subscribe.push((await confirmed) - at);
  }
  for (const id of ids) await send(sender.client, { command: 'unsubscribe', identifier: id });
  await sleep(2_000);
  const whisper: number[] = [];
  for (let i = 0; i < FRAMES; i++) {
    const delivered = receiver.client.waitFor(
      (f) =>
        f.identifier === sender.identifier && (f.message as { n?: unknown })?.n === `${label}-${i}`,
      `whisper ${i} (${label})`,
    );
    const at = performance.now();
    await send(sender.client, {
      command: 'whisper',
      identifier: sender.identifier,
      data: { n: `${label}-${i}` },
    });
    whisper.push((await delivered) - at);
  }
  return { subscribe, whisper };
}

/** The connection id of `client`: its identity's one connection in the connections table. */
async function connectionIdOf(bench: BenchStack, identity: string): Promise<string> {
  const client = new DynamoDBClient({
    endpoint: bench.stack.dynamodbEndpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    const store = new DynamoConnectionStore({
      client,
      tableName: bench.stack.resources.tables.connections,
    });
    const found = await store.connectionsOf(identity);
    if (found.length !== 1) throw new Error(`${identity} has ${found.length} connections, not 1`);
    return found[0]!.connectionId;
  } finally {
    client.destroy();
  }
}

/** The event wsDefault got from API Gateway's Lambda integration, as one frame's batch. */
function oneFrameEvent(connectionId: string, frame: object): SQSEvent {
  return sqsEventOf(
    [
      {
        MessageId: randomUUID(),
        ReceiptHandle: 'direct',
        Body: JSON.stringify(frame),
        Attributes: { MessageGroupId: connectionId },
      },
    ],
    'arn:aws:sqs:us-east-1:000000000000:direct',
  );
}

/**
 * `BURST_CONNECTIONS` connections each send `BURST_FRAMES` subscribes at once: the records
 * per wsDefault invocation under load (one connection's frames ride in one batch).
 */
async function burstBatching(
  bench: BenchStack,
  secrets: BenchSecrets,
): Promise<{ frames: number; invocations: number; ms: number }> {
  const clients = await Promise.all(
    Array.from({ length: BURST_CONNECTIONS }, async (_, i) => {
      const token = await createConnectToken(
        { sub: `frame-order-burst-${i}`, ttlSeconds: 600 },
        secrets.LAMBDACABLE_JWT_SECRET,
      );
      return BenchClient.connect(bench.stack.wsUrl, token, 30_000, { pi: '60' });
    }),
  );
  const before = bench.invocations.length;
  const started = performance.now();
  try {
    await Promise.all(
      clients.flatMap((client, c) =>
        Array.from({ length: BURST_FRAMES }, (_, k) =>
          client.subscribe(
            signedIdentifier(
              signStreamName(
                `bench/frame-order/burst/${c}/${k}`,
                secrets.LAMBDACABLE_STREAMS_SECRET,
              ),
            ),
            60_000,
          ),
        ),
      ),
    );
  } finally {
    for (const c of clients) c.close();
  }
  const invocations = bench.invocations
    .slice(before)
    .filter((i) => i.functionName === WS_DEFAULT).length;
  return {
    frames: BURST_CONNECTIONS * BURST_FRAMES,
    invocations,
    ms: performance.now() - started,
  };
}

/** The figures: latency of both paths, then requests and price per million frames. */
function figures(m: {
  queued: { subscribe: number[]; whisper: number[] };
  direct: { subscribe: number[]; whisper: number[] };
  framesSent: number;
  invocations: number;
  deletes: number;
  burst: { frames: number; invocations: number; ms: number };
}): Figure[] {
  const ms = (v: number) => `${v.toFixed(1)} ms`;
  const row = (name: string, q: number, queued: number[], direct: number[]): Figure => ({
    name: `${name} ${q === 0.5 ? 'p50' : 'p99'}, ${FRAMES} one by one`,
    value: ms(quantile(queued, q)),
    reference: `${ms(quantile(direct, q))} one invocation per frame`,
    ratio: `${(quantile(queued, q) / quantile(direct, q)).toFixed(2)}x`,
  });
  // One by one, every frame is a batch of its own: its SendMessage (API Gateway's), the
  // mapping's ReceiveMessage that got it and its DeleteMessageBatch, and an invocation.
  const perFrame = m.invocations / m.framesSent;
  const sqsPerFrame = 1 + perFrame + m.deletes / m.framesSent;
  const burstPerFrame = m.burst.invocations / m.burst.frames;
  const million = 1e6;
  const priced = (sqs: number, invocations: number) =>
    costOf({
      apiGatewayMessages: million,
      sqsFifoRequests: sqs * million,
      lambdaRequests: invocations * million,
    }).total;
  const today = priced(0, 1);
  const ordered = priced(sqsPerFrame, perFrame);
  const orderedBurst = priced(1 + 2 * burstPerFrame, burstPerFrame);
  return [
    row('Subscribe → confirm', 0.5, m.queued.subscribe, m.direct.subscribe),
    row('Subscribe → confirm', 0.99, m.queued.subscribe, m.direct.subscribe),
    row('Whisper → other subscriber', 0.5, m.queued.whisper, m.direct.whisper),
    row('Whisper → other subscriber', 0.99, m.queued.whisper, m.direct.whisper),
    {
      name: 'AWS requests per frame, one by one (SQS + Lambda invocations)',
      value: (sqsPerFrame + perFrame).toFixed(2),
      reference: '1.00 one invocation per frame',
      ratio: `${(sqsPerFrame + perFrame).toFixed(2)}x`,
      extra: `SQS ${sqsPerFrame.toFixed(2)} (SendMessage 1, ReceiveMessage and DeleteMessageBatch per batch), invocations ${perFrame.toFixed(2)}; ${m.framesSent} frames`,
    },
    {
      name: `Frames per wsDefault invocation, ${BURST_CONNECTIONS} connections × ${BURST_FRAMES} at once`,
      value: (1 / burstPerFrame).toFixed(2),
      reference: '1.00 one invocation per frame',
      ratio: `${burstPerFrame.toFixed(2)}x the invocations`,
      extra: `${m.burst.invocations} invocations for ${m.burst.frames} frames in ${Math.round(m.burst.ms)} ms`,
    },
    {
      name: 'List price per million frames, one by one (API Gateway message, SQS, Lambda requests)',
      value: `$${ordered.toFixed(2)}`,
      reference: `$${today.toFixed(2)} one invocation per frame`,
      ratio: `${(ordered / today).toFixed(2)}x`,
      extra:
        `SQS FIFO $${PRICES.sqsFifoRequest * million}/M requests; in bursts ` +
        `$${orderedBurst.toFixed(2)}; Lambda duration and DynamoDB are the same work on both ` +
        'paths; idle, the mapping long-polls (a few empty receives a minute per poller)',
    },
  ];
}
