/**
 * Issues 22 and 34: `POST /_broadcast` with an `Idempotency-Key`. A client that retries after
 * a 500 or a timeout with the same key does not duplicate what was written: a repeat gets the
 * first answer (Powertools Idempotency in the `idempotency` table), and a retry of a failed
 * request gives each message the event id it had, so the outbox refuses what the failed
 * attempt wrote (a round, a transaction of a split round, or all of it when only the answer
 * was lost). Through the real handler, on DynamoDB Local; a failed call is injected.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { consumerGroupsFor } from '../../infra/deploy/consumers';
import { queueUrlVariable, type TableName, tableVariable } from '../../infra/deploy/names';
import { DynamoConnectionStore, DynamoRequestIdStore } from '../../lib/aws';
import { BROADCAST_TOPIC, MAX_IDEMPOTENCY_KEY_CHARS, RemoteCommandEvent } from '../../lib/core';
import { CLAIM_TTL_SECONDS, requestIdStoreContract } from '../contract/request-ids';
import { testResources } from '../helpers/aws';
import { outboxPoller, receiveAll } from '../helpers/relay';

/** The consumer groups of this environment (read once, as a deployment's start reads them). */
const consumerGroups = consumerGroupsFor(process.env);

type Env = Awaited<ReturnType<typeof testResources>>;

/** The broadcast key the handler runs with (32 bytes or more, as configFromEnv requires). */
const BROADCAST_KEY = 'idempotency-broadcast-key-0123456789abcdef';

let env: Env;
let handler: typeof import('../../functions/http-broadcast').handler;
/** The stream whose outbox write fails while set (see `failWritesOf`). */
let doomed: string | undefined;
/**
 * The `nth` TransactWriteItems from now fails (see `failWritesOf`): before DynamoDB sees it,
 * or, `lost`, after it committed (its answer lost, as in a timeout).
 */
let fault: { nth: number; lost: boolean } | undefined;

let run = 0;
/** Stream names of their own for each test. */
const streams = (n: number) => {
  run++;
  return Array.from({ length: n }, (_, i) => `idem/${run}/${i}`);
};
const body = (names: readonly string[], data = '1') =>
  JSON.stringify(names.map((stream) => ({ stream, data })));

async function post(requestBody: string, key?: string): Promise<APIGatewayProxyStructuredResultV2> {
  const event = {
    headers: {
      authorization: `Bearer ${BROADCAST_KEY}`,
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: requestBody,
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
  // As Lambda hands it in: the in-progress lock ends when the invocation would time out.
  const context = { getRemainingTimeInMillis: () => 30_000 } as Context;
  return (await handler(event, context)) as APIGatewayProxyStructuredResultV2;
}

/** The outbox rows of a key (a stream's), in event id order. */
async function rows(key: string) {
  const out = await env.dynamodb.send(
    new QueryCommand({
      TableName: env.tables.outbox,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: `${BROADCAST_TOPIC}#${key}` } },
      ConsistentRead: true,
    }),
  );
  return out.Items ?? [];
}

/** Outbox rows of each stream. */
async function written(names: readonly string[]): Promise<number[]> {
  return Promise.all(names.map(async (stream) => (await rows(stream)).length));
}

/** The last character of each broadcast of a stream (its `data` ends the Avro), in id order. */
async function datas(stream: string): Promise<(string | undefined)[]> {
  return (await rows(stream)).map((i) => Buffer.from(i.payload!.B!).toString('latin1').at(-1));
}

async function idempotencyRecords(): Promise<number> {
  const out = await env.dynamodb.send(
    new ScanCommand({ TableName: env.tables.idempotency, ConsistentRead: true }),
  );
  return out.Count ?? 0;
}

/**
 * Makes the write of `doomed`'s row fail in DynamoDB itself: in a transaction, its `Put` gets a
 * condition DynamoDB Local finds false (so the transaction is cancelled as a whole); in a
 * batch, the request that holds it fails. And fails the call `fault` names, whatever it holds
 * (past the SDK's retries, which come later in the stack).
 */
function failWritesOf(client: DynamoDBClient): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as {
        TransactItems?: {
          Put?: { Item?: { pk?: { S?: string } }; ConditionExpression?: string };
        }[];
        RequestItems?: Record<string, { PutRequest?: { Item?: { pk?: { S?: string } } } }[]>;
      };
      const isDoomed = (pk: string | undefined) =>
        doomed !== undefined && pk === `${BROADCAST_TOPIC}#${doomed}`;
      if (context.commandName === 'TransactWriteItemsCommand' && fault && --fault.nth === 0) {
        const { lost } = fault;
        fault = undefined;
        if (!lost) throw new Error('injected failure of a TransactWriteItems');
        await next(args);
        throw new Error('injected loss of the answer of a committed TransactWriteItems');
      }
      if (context.commandName === 'TransactWriteItemsCommand') {
        for (const item of input.TransactItems ?? []) {
          if (item.Put && isDoomed(item.Put.Item?.pk?.S)) {
            item.Put.ConditionExpression = 'attribute_exists(pk)';
          }
        }
      }
      if (context.commandName === 'BatchWriteItemCommand') {
        const requests = Object.values(input.RequestItems ?? {}).flat();
        if (requests.some((r) => isDoomed(r.PutRequest?.Item?.pk?.S))) {
          throw new Error(`injected failure of the batch that holds ${doomed}`);
        }
      }
      return next(args);
    },
    { step: 'initialize', name: 'failWritesOf' },
  );
}

beforeAll(async () => {
  env = await testResources('idempotency', consumerGroups);
  // The composition root of functions/ reads these (as serverless.yml sets them).
  vi.stubEnv('AWS_REGION', 'us-east-1');
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'local');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
  vi.stubEnv('LAMBDACABLE_DYNAMODB_ENDPOINT', inject('dynamodbEndpoint'));
  vi.stubEnv('LAMBDACABLE_SQS_ENDPOINT', inject('sqsEndpoint'));
  vi.stubEnv('LAMBDACABLE_BROADCAST_KEY', BROADCAST_KEY);
  vi.stubEnv('POWERTOOLS_DEV', 'true');
  vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'ERROR');
  for (const [table, name] of Object.entries(env.tables)) {
    vi.stubEnv(tableVariable(table as TableName), name);
  }
  for (const group of consumerGroups) {
    vi.stubEnv(queueUrlVariable(group.name), env.queues[group.name]!.url);
  }
  const { runtime } = await import('../../functions/runtime');
  // Before the client's first call: it resolves its middleware once (cacheMiddleware).
  failWritesOf(runtime().dynamodb);
  ({ handler } = await import('../../functions/http-broadcast'));
});

describe('POST /_broadcast with an Idempotency-Key', () => {
  it('writes a request once for one key, and answers a repeat the same', async () => {
    const names = streams(3);
    const first = await post(body(names), 'key-once');
    const repeat = await post(body(names), 'key-once');
    expect(first).toEqual({ statusCode: 201, body: '' });
    expect(repeat).toEqual(first);
    expect(await written(names)).toEqual([1, 1, 1]);
  });

  it('answers 422 to a repeat with another body, and writes nothing of it', async () => {
    const names = streams(2);
    expect(await post(body(names), 'key-reused')).toMatchObject({ statusCode: 201 });
    const other = await post(body(names, '2'), 'key-reused');
    expect(other).toEqual({
      statusCode: 422,
      body: 'Idempotency-Key was used with a different body',
    });
    expect(await written(names)).toEqual([1, 1]);
  });

  it('writes each request without the header, and keeps no record of them', async () => {
    const names = streams(2);
    const records = await idempotencyRecords();
    expect(await post(body(names))).toEqual({ statusCode: 201, body: '' });
    expect(await post(body(names))).toEqual({ statusCode: 201, body: '' });
    expect(await written(names)).toEqual([2, 2]);
    expect(await idempotencyRecords()).toBe(records);
  });

  it('answers 409 to a repeat while the first is in progress, which alone writes', async () => {
    const names = streams(20);
    const answers = await Promise.all([
      post(body(names), 'key-concurrent'),
      post(body(names), 'key-concurrent'),
    ]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([201, 409]);
    expect(answers.find((a) => a.statusCode === 409)?.body).toBe(
      'a request with this Idempotency-Key is in progress: retry later',
    );
    expect(await written(names)).toEqual(names.map(() => 1));
  });

  it('answers 400 to a key over the limit, and accepts one at the limit', async () => {
    const [over, at] = [streams(1), streams(1)];
    expect(await post(body(over), 'k'.repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1))).toEqual({
      statusCode: 400,
      body: `Idempotency-Key is ${MAX_IDEMPOTENCY_KEY_CHARS + 1} characters, the limit is ${MAX_IDEMPOTENCY_KEY_CHARS}`,
    });
    expect(await post(body(at), 'k'.repeat(MAX_IDEMPOTENCY_KEY_CHARS))).toMatchObject({
      statusCode: 201,
    });
    expect(await written([...over, ...at])).toEqual([0, 1]);
  });

  it.each([
    ['empty', ''],
    ['with a space', 'a key'],
    ['not ASCII', 'clé'],
  ])('answers 400 to a key %s, and writes nothing', async (_, key) => {
    const names = streams(1);
    expect(await post(body(names), key)).toEqual({
      statusCode: 400,
      body: 'Idempotency-Key must be 1 or more visible ASCII characters (no spaces), e.g. a UUID',
    });
    expect(await written(names)).toEqual([0]);
  });
});

describe('POST /_broadcast writes a request all or none', () => {
  it('writes nothing of a request whose transaction fails; its retry with the key writes it once', async () => {
    const names = streams(30);
    doomed = names[29];
    try {
      await expect(post(body(names), 'key-failed')).rejects.toThrow();
    } finally {
      doomed = undefined;
    }
    expect(await written(names)).toEqual(names.map(() => 0));
    // The failed request's record is gone: the retry runs, once.
    expect(await post(body(names), 'key-failed')).toEqual({ statusCode: 201, body: '' });
    expect(await post(body(names), 'key-failed')).toEqual({ statusCode: 201, body: '' });
    expect(await written(names)).toEqual(names.map(() => 1));
  });

  it('writes the items of one stream in rounds, in request order', async () => {
    const [stream] = streams(1);
    const items = [1, 2, 3].map((n) => ({ stream: stream!, data: String(n) }));
    expect(await post(JSON.stringify(items), 'key-rounds')).toMatchObject({ statusCode: 201 });
    // Sorted by event id (`sk`): the ids keep the request's order.
    expect(await datas(stream!)).toEqual(['1', '2', '3']);
  });
});

describe('POST /_broadcast retried with its Idempotency-Key writes each event once (issue 34)', () => {
  const rounds = (a: string, b: string, last = '2') =>
    JSON.stringify([
      { stream: a, data: '1' },
      { stream: a, data: last },
      { stream: b, data: '1' },
    ]);

  it('writes only what a request failed in its second round did not: once in the outbox, once from the relay', async () => {
    const [a, b] = streams(2) as [string, string];
    // Round 1: a's first item and b's; round 2, committed after it: a's second.
    fault = { nth: 2, lost: false };
    await expect(post(rounds(a, b), 'key-round-2')).rejects.toThrow('injected failure');
    expect(fault).toBeUndefined();
    expect(await written([a, b])).toEqual([1, 1]);
    expect(await post(rounds(a, b), 'key-round-2')).toEqual({ statusCode: 201, body: '' });
    expect(await written([a, b])).toEqual([2, 1]);
    expect(await datas(a)).toEqual(['1', '2']);
    const { relay } = await import('../../functions/runtime');
    await outboxPoller(env.outboxStreamArn!, relay()).drain();
    const relayed = (await receiveAll(env.sqs, env.queues.broadcast!.url))
      .map((m) => m.Attributes?.MessageGroupId)
      .filter((group) => group === a || group === b);
    expect(relayed.sort()).toEqual([a, a, b].sort());
  });

  it('writes only what failed in the second transaction of a round over 100 items, the disconnect’s new stream too', async () => {
    const names = streams(151);
    const [late] = names.splice(150, 1) as [string];
    const connectionId = `idem-conn-${run}`;
    const store = new DynamoConnectionStore({
      client: env.dynamodb,
      tableName: env.tables.connections,
    });
    const hold = (stream: string) =>
      store.addSubscription({ connectionId, stream, identifier: `id-${stream}` });
    await Promise.all(names.map(hold));
    // An unsubscribe of each of its 150 streams, then the disconnect: one round of 151 Puts,
    // in two transactions.
    const kick = { command: 'disconnect', payload: { connectionId } };
    const request = JSON.stringify([kick]);
    fault = { nth: 2, lost: false };
    await expect(post(request, 'key-split')).rejects.toThrow('injected failure');
    expect((await written(names)).filter((n) => n === 1)).toHaveLength(100);
    await hold(late); // the retry reads one stream more
    expect(await post(request, 'key-split')).toEqual({ statusCode: 201, body: '' });
    expect(await written([...names, late])).toEqual([...names, late].map(() => 1));
    const disconnectKey = RemoteCommandEvent.keyOf({
      command: 'disconnect',
      payload: JSON.stringify(kick.payload),
    })!;
    expect(await rows(disconnectKey)).toHaveLength(1);
  });

  it('writes nothing again when the request committed but its answer was lost', async () => {
    const names = streams(3);
    fault = { nth: 1, lost: true };
    await expect(post(body(names), 'key-lost')).rejects.toThrow('injected loss');
    expect(await written(names)).toEqual([1, 1, 1]);
    expect(await post(body(names), 'key-lost')).toEqual({ statusCode: 201, body: '' });
    expect(await written(names)).toEqual([1, 1, 1]);
  });

  it('answers 422 to a retry with another body after a failed attempt, and writes none of it', async () => {
    const [a, b] = streams(2) as [string, string];
    fault = { nth: 2, lost: false };
    await expect(post(rounds(a, b), 'key-other-body')).rejects.toThrow('injected failure');
    expect(await post(rounds(a, b, 'x'), 'key-other-body')).toEqual({
      statusCode: 422,
      body: 'Idempotency-Key was used with a different body',
    });
    expect(await post(rounds(a, b), 'key-other-body')).toEqual({ statusCode: 201, body: '' });
    expect(await datas(a)).toEqual(['1', '2']);
  });

  it('without the header, as documented: a repeat of a request failed in its second round writes its first round again', async () => {
    const [a, b] = streams(2) as [string, string];
    fault = { nth: 2, lost: false };
    await expect(post(rounds(a, b))).rejects.toThrow('injected failure');
    expect(await post(rounds(a, b))).toEqual({ statusCode: 201, body: '' });
    expect(await written([a, b])).toEqual([3, 2]);
  });
});

requestIdStoreContract(
  'DynamoRequestIdStore (DynamoDB Local)',
  async (clock) =>
    new DynamoRequestIdStore({
      client: env.dynamodb,
      tableName: env.tables.idempotency,
      ttlSeconds: CLAIM_TTL_SECONDS,
      clock,
    }),
);
