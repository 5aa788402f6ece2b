import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../infra/local/services';
import { freeStackPorts, type LocalStack, startLocalStack } from '../../infra/local/stack';
import { DynamoRevocationStore } from '../../lib/aws';
import { signStreamName } from '../../lib/core';
import { until } from '../helpers/cable';
import { type Frame, RawClient } from '../helpers/raw-client';

// A hostile client against the whole local stack, as `npm start` runs it, with the default
// public namespace: what it tries to multiply (padded identifiers, a stream twice, more
// subscriptions than allowed, floods) is refused as docs/security.md says, its whispers reach no
// one who did not allow them, and what a remote command revoked stays revoked on reconnect.

const MAX_SUBSCRIPTIONS = 6;
const env = {
  LAMBDACABLE_JWT_SECRET: 'hostile-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'hostile-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'hostile-broadcast-key-0123456789abcdef0123456789',
  LAMBDACABLE_PUBLIC_STREAMS: 'true',
  // LAMBDACABLE_PUBLIC_STREAM_PREFIX unset: `public:`.
  LAMBDACABLE_WHISPER_ON_SIGNED: 'false',
  LAMBDACABLE_MAX_SUBSCRIPTIONS: String(MAX_SUBSCRIPTIONS),
  // Enough for each test's own frames, and a flood of a few dozen is over it on any machine.
  LAMBDACABLE_RATE_LIMIT: '1',
  LAMBDACABLE_RATE_BURST: '15',
};
const BURST = Number(env.LAMBDACABLE_RATE_BURST);
const secret = new TextEncoder().encode(env.LAMBDACABLE_JWT_SECRET);

let stack: LocalStack;
const clients: RawClient[] = [];
let sequence = 0;

const pubsub = (stream: string) => JSON.stringify({ channel: '$pubsub', stream_name: stream });
const signed = (stream: string) =>
  JSON.stringify({
    channel: '$pubsub',
    signed_stream_name: signStreamName(stream, env.LAMBDACABLE_STREAMS_SECRET),
  });
const unique = (label: string) => `${label}/${process.pid}/${++sequence}`;

const token = (sub: string) =>
  new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setExpirationTime(Math.floor(Date.now() / 1000) + 600)
    .sign(secret);

/** A welcomed client of `sub`, restoring `sid` when given. */
async function welcomed(sub = 'mallory', sid?: string): Promise<{ c: RawClient; welcome: Frame }> {
  const c = await RawClient.connect(stack.wsUrl, {
    jid: await token(sub),
    ...(sid ? { sid } : {}),
  });
  clients.push(c);
  const welcome = await c.next((f) => f.type === 'welcome', 'welcome');
  return { c, welcome };
}

async function post(body: object): Promise<void> {
  const response = await fetch(`${stack.httpUrl}/_broadcast`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${env.LAMBDACABLE_BROADCAST_KEY}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(201);
}

/** Broadcasts `n` to `stream` and waits until `c` has it on `identifier`. */
async function delivered(c: RawClient, stream: string, identifier: string): Promise<number> {
  const n = ++sequence;
  const from = c.frames.length;
  await post({ stream, data: JSON.stringify({ n }) });
  await c.next(
    (f) => f.identifier === identifier && (f.message as { n?: number })?.n === n,
    `broadcast ${n} on ${stream}`,
    from,
  );
  return n;
}

/** Frames of `c` carrying broadcast `n`. */
const copiesOf = (c: RawClient, n: number) =>
  c.frames.filter((f) => (f.message as { n?: number } | undefined)?.n === n);

beforeAll(async () => {
  stack = await startLocalStack({ ...freeStackPorts(), env, output: 'quiet', watch: false });
}, 240_000);

afterAll(async () => {
  for (const c of clients) c.ws.terminate();
  await stack?.stop();
}, 60_000);

describe('a hostile client cannot multiply what it costs', () => {
  it('gets one paid copy of a stream however it pads or spells the identifier', async () => {
    const { c } = await welcomed();
    const stream = unique('public:padding');
    const first = pubsub(stream);
    expect(await c.subscribe(first)).toEqual({ type: 'confirm_subscription', identifier: first });
    const refused = [
      // An extra key.
      JSON.stringify({ channel: '$pubsub', stream_name: stream, x: 1 }),
      // The same keys in another order.
      JSON.stringify({ stream_name: stream, channel: '$pubsub' }),
      // The same stream, signed.
      signed(stream),
    ];
    for (const identifier of refused) {
      expect(await c.subscribe(identifier)).toEqual({ type: 'reject_subscription', identifier });
    }
    const n = await delivered(c, stream, first);
    await new Promise((r) => setTimeout(r, 500)); // a second copy would be on its way
    expect(copiesOf(c, n)).toHaveLength(1);
  });

  it(`holds at most ${MAX_SUBSCRIPTIONS} subscriptions, and a freed slot takes a new one`, async () => {
    const { c } = await welcomed();
    const ids = Array.from({ length: MAX_SUBSCRIPTIONS + 2 }, () => pubsub(unique('public:cap')));
    // At once, as a client sends them: the count holds under concurrent subscribes.
    const answers = await Promise.all(ids.map((id) => c.subscribe(id)));
    const confirmed = answers.filter((f) => f.type === 'confirm_subscription');
    expect(confirmed).toHaveLength(MAX_SUBSCRIPTIONS);
    expect(answers.filter((f) => f.type === 'reject_subscription')).toHaveLength(2);
    const held = String(confirmed[0]!.identifier);
    c.send({ command: 'unsubscribe', identifier: held });
    const another = pubsub(unique('public:cap'));
    // The unsubscribe runs in its own invocation: until it is done, the slot is not free.
    let answer = await c.subscribe(another);
    for (let i = 0; i < 10 && answer.type === 'reject_subscription'; i++) {
      await new Promise((r) => setTimeout(r, 500));
      answer = await c.subscribe(another);
    }
    expect(answer).toEqual({ type: 'confirm_subscription', identifier: another });
  });

  it('is refused, then disconnected, when it floods: history and whispers beyond the bucket reach no one', async () => {
    const stream = unique('public:flood');
    const identifier = pubsub(stream);
    const { c: listener } = await welcomed('bob');
    expect(await listener.subscribe(identifier)).toMatchObject({ type: 'confirm_subscription' });
    const { c } = await welcomed();
    expect(await c.subscribe(identifier)).toMatchObject({ type: 'confirm_subscription' });

    const from = c.frames.length;
    const history = { command: 'history', identifier, history: { since: 0 } };
    // A connection's frames run one after another, so the bucket refills (1 a second) while
    // they do: 8 more than it holds are refused unless they take over 8 s, and fewer than
    // BURST + 1 refusals in a row do not disconnect yet.
    const requests = BURST + 8;
    for (let i = 0; i < requests; i++) c.send(history);
    const answers = await until(
      () => {
        const got = c.frames
          .slice(from)
          .filter((f) => f.type === 'confirm_history' || f.type === 'reject_history');
        return got.length >= requests ? got : undefined;
      },
      30_000,
      'an answer to each history request',
    );
    expect(answers.filter((f) => f.type === 'reject_history').length).toBeGreaterThan(0);

    const whispers = 3 * BURST;
    for (let i = 0; i < whispers; i++) c.send({ command: 'whisper', identifier, data: { i } });
    await c.next((f) => f.type === 'disconnect', 'the disconnect', from, 30_000);
    expect(c.frames.slice(from).filter((f) => f.type === 'disconnect')).toEqual([
      { type: 'disconnect', reason: 'too_many_requests', reconnect: false },
    ]);
    await until(() => c.closed, 10_000, 'the close');
    await new Promise((r) => setTimeout(r, 1_000));
    const heard = listener.frames.filter((f) => f.identifier === identifier && 'message' in f);
    // At most the bucket (less what the subscribe and history took) plus its refill got through.
    expect(heard.length).toBeLessThan(BURST + 5);
    expect(heard.length).toBeLessThan(whispers);
  });
});

describe('namespaces', () => {
  it('never lets a plain name read a stream outside the public prefix', async () => {
    const { c } = await welcomed();
    for (const stream of ['private/room', 'publicity', 'Public:x']) {
      const identifier = pubsub(stream);
      expect(await c.subscribe(identifier)).toEqual({ type: 'reject_subscription', identifier });
    }
    // Its signed name is the way in.
    const identifier = signed('private/room');
    expect(await c.subscribe(identifier)).toEqual({ type: 'confirm_subscription', identifier });
  });

  it('whispers into a stream reach no subscription that does not allow them', async () => {
    const stream = unique('public:mixed');
    const { c: signedOne } = await welcomed('bob');
    expect(await signedOne.subscribe(signed(stream))).toMatchObject({
      type: 'confirm_subscription',
    });
    const { c: plainOne } = await welcomed('carol');
    expect(await plainOne.subscribe(pubsub(stream))).toMatchObject({
      type: 'confirm_subscription',
    });
    const { c } = await welcomed();
    expect(await c.subscribe(pubsub(stream))).toMatchObject({ type: 'confirm_subscription' });
    c.send({ command: 'whisper', identifier: pubsub(stream), data: { typing: true } });
    await plainOne.next((f) => 'message' in f, 'the whisper on the plain-name subscription');
    // A broadcast after the whisper: once it is there, the whisper would have been too.
    const n = await delivered(signedOne, stream, signed(stream));
    expect(signedOne.frames.filter((f) => 'message' in f).map((f) => f.message)).toEqual([{ n }]);
  });
});

describe('revocation holds across a reconnect', () => {
  it('does not restore a stream unsubscribed remotely while the client was away', async () => {
    const revoked = unique('room/revoked');
    const kept = unique('room/kept');
    const { c, welcome } = await welcomed();
    for (const stream of [revoked, kept]) {
      expect(await c.subscribe(signed(stream))).toMatchObject({ type: 'confirm_subscription' });
    }
    await c.close();
    await new Promise((r) => setTimeout(r, 1_000)); // `$disconnect` stores the session
    await post({ command: 'unsubscribe', payload: { stream: revoked } });
    // The command goes through the outbox and the broadcast consumer: wait for it to land.
    const revocations = new DynamoRevocationStore({
      client: new DynamoDBClient({
        endpoint: stack.dynamodbEndpoint,
        region: LOCAL_REGION,
        credentials: LOCAL_CREDENTIALS,
      }),
      tableName: stack.resources.tables.sessions,
    });
    const deadline = Date.now() + 30_000;
    while ((await revocations.revokedAt([{ kind: 'stream', name: revoked }])).size === 0) {
      if (Date.now() > deadline) throw new Error('timed out waiting for the remote unsubscribe');
      await new Promise((r) => setTimeout(r, 200));
    }
    const { c: back, welcome: again } = await welcomed('mallory', String(welcome.sid));
    expect(again).toMatchObject({ restored: true, restored_ids: [signed(kept)] });
    const n = await delivered(back, kept, signed(kept));
    await post({ stream: revoked, data: JSON.stringify({ n: n + 1 }) });
    await new Promise((r) => setTimeout(r, 2_000));
    expect(back.frames.filter((f) => f.identifier === signed(revoked))).toEqual([]);
  });

  it('does not restore a session whose identity was disconnected remotely', async () => {
    const { c, welcome } = await welcomed('trudy');
    expect(await c.subscribe(signed(unique('room')))).toMatchObject({
      type: 'confirm_subscription',
    });
    await post({ command: 'disconnect', payload: { identity: 'trudy', reconnect: false } });
    await c.next((f) => f.type === 'disconnect', 'the remote disconnect');
    await until(() => c.closed, 10_000, 'the close');
    await new Promise((r) => setTimeout(r, 1_000));
    const { welcome: again } = await welcomed('trudy', String(welcome.sid));
    expect(again).toEqual({ type: 'welcome', sid: expect.any(String) });
    expect(again.sid).not.toBe(welcome.sid);
  });
});
