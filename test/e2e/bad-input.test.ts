import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeStackPorts, type LocalStack, startLocalStack } from '../../infra/local/stack';
import {
  MAX_BROADCAST_BODY_BYTES,
  MAX_BROADCAST_DATA_BYTES,
  MAX_BROADCAST_ITEMS,
  MAX_IDEMPOTENCY_KEY_CHARS,
  MAX_PRESENCE_ID_BYTES,
  MAX_PRESENCE_INFO_BYTES,
  MAX_STREAM_BYTES,
  signStreamName,
} from '../../lib/core';
import { until } from '../helpers/cable';
import { type Frame, RawClient } from '../helpers/raw-client';

// Bad input of every kind against the real local stack (serverless-offline, DynamoDB Local,
// fauxqs): each row states the exact answer, and that a good client on the same stack still
// gets the next broadcast (and, where the protocol keeps the connection open, that the same
// connection still works).

const env = {
  LAMBDACABLE_JWT_SECRET: 'bad-input-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'bad-input-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'bad-input-broadcast-key-0123456789abcdef0123456789',
  LAMBDACABLE_PUBLIC_STREAMS: 'true',
  LAMBDACABLE_PUBLIC_STREAM_PREFIX: '',
  LAMBDACABLE_ALLOW_ANONYMOUS: 'false',
  LAMBDACABLE_JWT_AUDIENCE: 'bad-input-cable',
  // A bucket small and slow enough that a flood of a few dozen frames is over it on any
  // machine; every other row sends at most 4 limited frames per connection.
  LAMBDACABLE_RATE_LIMIT: '0.5',
  LAMBDACABLE_RATE_BURST: '20',
};
const RATE = Number(env.LAMBDACABLE_RATE_LIMIT);
const BURST = Number(env.LAMBDACABLE_RATE_BURST);
const secret = new TextEncoder().encode(env.LAMBDACABLE_JWT_SECRET);

/** A raw client on this file's stack, tracked for the clean-up. */
class BadInputClient extends RawClient {
  static async open(query: Record<string, string>): Promise<BadInputClient> {
    const client = await BadInputClient.connect(stack.wsUrl, query);
    clients.push(client);
    return client;
  }

  /** Connects with a good token and waits for welcome. */
  static async welcomed(query: Record<string, string> = {}): Promise<BadInputClient> {
    const client = await BadInputClient.open({ jid: await goodToken(), ...query });
    await client.next((f) => f.type === 'welcome', 'welcome');
    return client;
  }

  /** Sends a frame and proves nothing comes back: a marker subscribe is answered first. */
  async sendExpectingSilence(frame: object | string): Promise<void> {
    const from = this.frames.length;
    this.send(frame);
    const marker = pubsub(`marker/${markers++}`);
    expect(await this.subscribe(marker)).toEqual({
      type: 'confirm_subscription',
      identifier: marker,
    });
    // Frames of one connection run concurrently: give a late answer to `frame` a moment.
    await new Promise((r) => setTimeout(r, 300));
    expect(this.frames.slice(from).filter((f) => f.identifier !== marker)).toEqual([]);
  }
}

let stack: LocalStack;
const clients: BadInputClient[] = [];
let good: BadInputClient;
let markers = 0;
let sequence = 0;
const GOOD_STREAM = 'good/stream';

const pubsub = (stream: string) => JSON.stringify({ channel: '$pubsub', stream_name: stream });
const signedId = (signed: string) =>
  JSON.stringify({ channel: '$pubsub', signed_stream_name: signed });

function jwt(claims: Record<string, unknown> = {}): SignJWT {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject('user-1');
}
const now = () => Math.floor(Date.now() / 1000);
const goodToken = () =>
  jwt()
    .setAudience(env.LAMBDACABLE_JWT_AUDIENCE)
    .setExpirationTime(now() + 600)
    .sign(secret);

async function post(
  body: string,
  authorization = `Bearer ${env.LAMBDACABLE_BROADCAST_KEY}`,
  headers: Readonly<Record<string, string>> = {},
): Promise<{ status: number; body: string }> {
  const response = await fetch(`${stack.httpUrl}/_broadcast`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, body: await response.text() };
}

/** Broadcasts to `stream` over HTTP and waits until `client` has it. */
async function delivered(client: BadInputClient, stream: string, identifier = pubsub(stream)) {
  const n = ++sequence;
  const from = client.frames.length;
  const answer = await post(JSON.stringify({ stream, data: JSON.stringify({ n }) }));
  expect(answer).toEqual({ status: 201, body: '' });
  const frame = await client.next(
    (f) => f.identifier === identifier && (f.message as { n?: number })?.n === n,
    `broadcast ${n} on ${stream}`,
    from,
  );
  expect(frame).toMatchObject({ stream_id: stream, epoch: expect.any(String) });
}

/** The good client on the same stack still gets the next broadcast. */
const goodClientStillServed = () => delivered(good, GOOD_STREAM);

beforeAll(async () => {
  stack = await startLocalStack({
    ...freeStackPorts(),
    env,
    output: 'quiet',
    watch: false,
  });
  good = await BadInputClient.welcomed();
  expect(await good.subscribe(pubsub(GOOD_STREAM))).toEqual({
    type: 'confirm_subscription',
    identifier: pubsub(GOOD_STREAM),
  });
}, 240_000);

afterAll(async () => {
  for (const c of clients) c.ws.terminate();
  await stack?.stop();
}, 60_000);

const longStream = 's'.repeat(MAX_STREAM_BYTES + 1);

interface FrameRow {
  readonly name: string;
  /** Sends the bad input on a welcomed connection and checks the exact answer. */
  readonly run: (c: BadInputClient) => Promise<void>;
}

const silent = (frame: object | string) => (c: BadInputClient) => c.sendExpectingSilence(frame);
const rejected = (identifier: string) => async (c: BadInputClient) => {
  expect(await c.subscribe(identifier)).toEqual({ type: 'reject_subscription', identifier });
};

/**
 * Sends `frames` at once and waits for an answer (`answers` types) to each identifier: under
 * the burst, so some are refused but never enough in a row to disconnect. Then waits for a
 * token, so that the row's own checks go on.
 */
async function flood(
  c: BadInputClient,
  frames: { command: string; identifier: string; history?: object }[],
  answers: readonly [string, string],
): Promise<Frame[]> {
  const from = c.frames.length;
  for (const frame of frames) c.send(frame);
  const got = await until(
    () => {
      const out = c.frames.slice(from).filter((f) => answers.includes(String(f.type)));
      return out.length >= frames.length ? out : undefined;
    },
    30_000,
    `${frames.length} answers (${answers.join(' or ')})`,
  );
  await new Promise((r) => setTimeout(r, 1000 / RATE + 200));
  return got;
}

const frameRows: FrameRow[] = [
  { name: 'a malformed JSON frame: nothing', run: silent('{"command":"subscribe",') },
  { name: 'a JSON frame that is no object: nothing', run: silent('[1,2,3]') },
  { name: 'a frame without command: nothing', run: silent({ identifier: pubsub('x') }) },
  {
    name: 'an unknown command: nothing',
    run: silent({ command: 'dance', identifier: pubsub(GOOD_STREAM) }),
  },
  {
    name: 'an oversize frame (over 32768 bytes): nothing',
    run: silent({ command: 'subscribe', identifier: pubsub('x'), pad: 'p'.repeat(33_000) }),
  },
  {
    name: 'a message on $pubsub (no actions): nothing',
    run: async (c) => {
      const identifier = pubsub('actions');
      await c.subscribe(identifier);
      await c.sendExpectingSilence({ command: 'message', identifier, data: '{"action":"x"}' });
    },
  },
  {
    name: 'an unknown channel: reject_subscription',
    run: rejected(JSON.stringify({ channel: 'ChatChannel', room: 1 })),
  },
  { name: 'an identifier that is not JSON: reject_subscription', run: rejected('chat/1') },
  {
    name: 'an identifier without stream: reject_subscription',
    run: rejected(JSON.stringify({ channel: '$pubsub' })),
  },
  {
    name: 'a forged signed stream: reject_subscription',
    run: rejected(signedId(`${Buffer.from('"chat/1"').toString('base64')}--${'0'.repeat(64)}`)),
  },
  {
    name: 'a stream signed with another secret: reject_subscription',
    run: rejected(signedId(signStreamName('chat/1', 'another-secret'))),
  },
  { name: 'a garbage signed stream: reject_subscription', run: rejected(signedId('garbage')) },
  {
    // A second identifier for a stream already subscribed would be a second, paid copy.
    name: 'a $pubsub identifier padded with another key: reject_subscription',
    run: rejected(
      JSON.stringify({
        channel: '$pubsub',
        signed_stream_name: signStreamName('chat/1', env.LAMBDACABLE_STREAMS_SECRET),
        pad: 1,
      }),
    ),
  },
  {
    // One stream, one subscription per connection: another spelling of a held stream.
    name: 'a second identifier of a stream the connection holds (keys reordered, then signed): reject_subscription, one copy delivered',
    run: async (c) => {
      const stream = `one/copy/${++sequence}`;
      const held = pubsub(stream);
      expect(await c.subscribe(held)).toEqual({ type: 'confirm_subscription', identifier: held });
      for (const identifier of [
        JSON.stringify({ stream_name: stream, channel: '$pubsub' }),
        signedId(signStreamName(stream, env.LAMBDACABLE_STREAMS_SECRET)),
      ]) {
        expect(await c.subscribe(identifier)).toEqual({ type: 'reject_subscription', identifier });
      }
      const from = c.frames.length;
      await delivered(c, stream);
      await new Promise((r) => setTimeout(r, 500));
      expect(c.frames.slice(from).filter((f) => 'message' in f)).toHaveLength(1);
    },
  },
  {
    name: `a public stream name over ${MAX_STREAM_BYTES} bytes: reject_subscription`,
    run: rejected(pubsub(longStream)),
  },
  {
    name: `a signed stream name over ${MAX_STREAM_BYTES} bytes: reject_subscription`,
    run: rejected(signedId(signStreamName(longStream, env.LAMBDACABLE_STREAMS_SECRET))),
  },
  {
    name: 'an identifier over 760 bytes: reject_subscription',
    run: rejected(JSON.stringify({ channel: '$pubsub', stream_name: 'x', pad: 'p'.repeat(800) })),
  },
  {
    name: 'a 400-character stream name (a subscription key over 1024 bytes before): reject_subscription',
    run: rejected(signedId(signStreamName('r'.repeat(400), env.LAMBDACABLE_STREAMS_SECRET))),
  },
  {
    name: 'history for an identifier not subscribed: reject_history',
    run: async (c) => {
      const identifier = pubsub('never-subscribed');
      const from = c.frames.length;
      c.send({ command: 'history', identifier, history: { since: now() - 10 } });
      expect(await c.next((f) => f.identifier === identifier, 'an answer', from)).toEqual({
        type: 'reject_history',
        identifier,
      });
    },
  },
  ...(
    [
      ['a fractional offset', { epoch: 'e', offset: 1.5 }],
      ['a negative offset', { epoch: 'e', offset: -3 }],
      ['a non-numeric offset', { epoch: 'e', offset: 'seven' }],
      ['a numeric epoch', { epoch: 12, offset: 1 }],
    ] as const
  ).map(
    ([what, position]): FrameRow => ({
      name: `history with ${what}: reject_history`,
      run: async (c) => {
        const stream = `history/${what.replace(/ /g, '-')}`;
        const identifier = pubsub(stream);
        await c.subscribe(identifier);
        const from = c.frames.length;
        c.send({ command: 'history', identifier, history: { streams: { [stream]: position } } });
        expect(await c.next((f) => f.identifier === identifier, 'an answer', from)).toEqual({
          type: 'reject_history',
          identifier,
        });
      },
    }),
  ),
  {
    name: `a flood of subscribes over the rate limit (${BURST} at once, ${RATE}/s): reject_subscription for the excess`,
    run: async (c) => {
      // Twice the burst: at least the burst is let through, so at most the burst is refused in
      // a row (one more would disconnect), and some are refused unless the flood took 40 s.
      const ids = Array.from({ length: 2 * BURST }, (_, i) =>
        pubsub(`flood/subscribe/${++sequence}/${i}`),
      );
      const answers = await flood(
        c,
        ids.map((identifier) => ({ command: 'subscribe', identifier })),
        ['confirm_subscription', 'reject_subscription'],
      );
      expect(answers.map((f) => f.identifier).sort()).toEqual([...ids].sort());
      const refused = answers.filter((f) => f.type === 'reject_subscription');
      expect(refused.length).toBeGreaterThan(0);
      expect(refused).toEqual(
        refused.map((f) => ({ type: 'reject_subscription', identifier: f.identifier })),
      );
      expect(answers.length - refused.length).toBeGreaterThanOrEqual(BURST);
    },
  },
  {
    name: 'a flood of history requests over the rate limit: reject_history for the excess',
    run: async (c) => {
      const identifier = pubsub(`flood/history/${++sequence}`);
      await c.subscribe(identifier);
      const request = { command: 'history', identifier, history: { since: now() - 10 } };
      // The subscribe took a token: one frame fewer than twice the burst (see above).
      const answers = await flood(c, Array(2 * BURST - 1).fill(request), [
        'confirm_history',
        'reject_history',
      ]);
      const refused = answers.filter((f) => f.type === 'reject_history');
      expect(refused.length).toBeGreaterThan(0);
      expect(refused).toEqual(refused.map(() => ({ type: 'reject_history', identifier })));
      expect(answers.length - refused.length).toBeGreaterThanOrEqual(BURST - 1);
    },
  },
  {
    name: 'a fractional offset riding on subscribe: confirm_subscription, then reject_history',
    run: async (c) => {
      const stream = 'history/on-subscribe';
      const identifier = pubsub(stream);
      const from = c.frames.length;
      c.send({
        command: 'subscribe',
        identifier,
        history: { streams: { [stream]: { epoch: 'e', offset: 0.25 } } },
      });
      await c.next((f) => f.type === 'reject_history', 'reject_history', from);
      expect(c.frames.slice(from).filter((f) => f.identifier === identifier)).toEqual([
        { type: 'confirm_subscription', identifier },
        { type: 'reject_history', identifier },
      ]);
    },
  },
  ...presenceRows(),
];

/**
 * Presence input a client must not get stored or sent: the sender gets its presence `error`
 * (or nothing, for a `leave`), and a subscriber of the stream sees none of it. Presence
 * frames of a stream go out in order, so the proof of "nothing" is that the good join sent
 * after the bad input is the first presence frame the listener gets, and the only member.
 */
function presenceRows(): FrameRow[] {
  const good = { id: 'good', info: { name: 'Good' } };
  const refusedJoin = (presence: unknown, reason: string) => async (c: BadInputClient) => {
    await afterBadPresence(c, async (identifier) => {
      const from = c.frames.length;
      c.send({ command: 'join', identifier, presence });
      expect(await c.next((f) => f.type === 'presence', 'the presence error', from)).toEqual({
        type: 'presence',
        identifier,
        message: { type: 'error', reason },
      });
    });
  };
  const afterBadPresence = async (
    c: BadInputClient,
    bad: (identifier: string) => Promise<void>,
  ) => {
    const identifier = pubsub(`presence/bad/${++sequence}`);
    const listener = await BadInputClient.welcomed();
    for (const client of [listener, c]) {
      expect(await client.subscribe(identifier)).toEqual({
        type: 'confirm_subscription',
        identifier,
      });
    }
    await bad(identifier);
    const from = c.frames.length;
    c.send({ command: 'join', identifier, presence: good });
    expect(await listener.next((f) => f.type === 'presence', 'the good join')).toEqual({
      type: 'presence',
      identifier,
      message: { type: 'join', ...good },
    });
    c.send({ command: 'presence', identifier, data: {} });
    const info = (f: Frame) =>
      f.type === 'presence' && (f.message as { type?: string }).type === 'info';
    expect(await c.next(info, 'the presence info', from)).toEqual({
      type: 'presence',
      identifier,
      message: { type: 'info', total: 1, records: [good] },
    });
  };
  const notSubscribed = (command: 'join' | 'presence') => async (c: BadInputClient) => {
    const identifier = pubsub(`presence/never-subscribed/${++sequence}`);
    const from = c.frames.length;
    c.send(
      command === 'join'
        ? { command, identifier, presence: good }
        : { command, identifier, data: {} },
    );
    expect(await c.next((f) => f.identifier === identifier, 'an answer', from)).toEqual({
      type: 'presence',
      identifier,
      message: { type: 'error', reason: 'not_subscribed' },
    });
  };
  return [
    {
      name: 'a presence join with an info over 1 KB as JSON: presence error info_too_large, nothing stored or sent',
      run: refusedJoin({ id: 'big', info: 'x'.repeat(MAX_PRESENCE_INFO_BYTES) }, 'info_too_large'),
    },
    {
      name: 'a presence join with an id over 128 bytes: presence error id_too_long, nothing stored or sent',
      run: refusedJoin({ id: 'i'.repeat(MAX_PRESENCE_ID_BYTES + 1) }, 'id_too_long'),
    },
    {
      name: 'a presence join without id: presence error no_id, nothing stored or sent',
      run: refusedJoin({ info: { name: 'Nobody' } }, 'no_id'),
    },
    {
      name: 'a presence join with a number for id: presence error no_id, nothing stored or sent',
      run: refusedJoin({ id: 42 }, 'no_id'),
    },
    {
      name: 'a presence that is not an object: presence error malformed, nothing stored or sent',
      run: refusedJoin('alice', 'malformed'),
    },
    {
      name: 'a presence join through an identifier not subscribed: presence error not_subscribed',
      run: notSubscribed('join'),
    },
    {
      name: 'a presence read through an identifier not subscribed: presence error not_subscribed',
      run: notSubscribed('presence'),
    },
    {
      name: 'a presence leave of a connection not present: nothing, and no leave to anyone',
      run: (c) =>
        afterBadPresence(c, (identifier) =>
          c.sendExpectingSilence({ command: 'leave', identifier }),
        ),
    },
    {
      name: 'a presence leave through an identifier not subscribed: nothing',
      run: silent({ command: 'leave', identifier: pubsub('presence/never-subscribed') }),
    },
  ];
}

describe('bad input on the WebSocket: the connection stays open and keeps working', () => {
  it.each(frameRows)('$name', async ({ run }) => {
    const c = await BadInputClient.welcomed();
    await run(c);
    expect(c.closed).toBe(false);
    // The same connection still subscribes and receives.
    const stream = `after/${++sequence}`;
    expect(await c.subscribe(pubsub(stream))).toEqual({
      type: 'confirm_subscription',
      identifier: pubsub(stream),
    });
    await delivered(c, stream);
    await goodClientStillServed();
  });
});

describe('a connection that keeps flooding: disconnect too_many_requests, then close', () => {
  it('drops whispers over the rate limit, then disconnects the sender without reconnect', async () => {
    const stream = `flood/whisper/${++sequence}`;
    const identifier = pubsub(stream);
    const listener = await BadInputClient.welcomed();
    await listener.subscribe(identifier);
    const c = await BadInputClient.welcomed();
    await c.subscribe(identifier);
    const started = Date.now();
    for (let n = 1; n <= 100; n++) c.send({ command: 'whisper', identifier, data: { n } });
    await until(() => c.closed, 20_000, 'the close');
    const elapsedS = (Date.now() - started) / 1000;
    expect(c.frames.filter((f) => f.type === 'disconnect')).toEqual([
      { type: 'disconnect', reason: 'too_many_requests', reconnect: false },
    ]);
    expect(c.frames.at(-1)).toEqual({
      type: 'disconnect',
      reason: 'too_many_requests',
      reconnect: false,
    });
    // Dropped, not delayed: the listener got the burst (less the subscribe) and the refill.
    await new Promise((r) => setTimeout(r, 1000));
    const whispers = listener.frames.filter((f) => f.identifier === identifier && !f.type);
    expect(whispers.length).toBeGreaterThanOrEqual(BURST - 1);
    expect(whispers.length).toBeLessThanOrEqual(BURST - 1 + Math.ceil(elapsedS * RATE) + 1);
    expect(whispers.every((f) => f.stream_id === undefined)).toBe(true);
    await goodClientStillServed();
  });
});

interface ConnectRow {
  readonly name: string;
  readonly query: () => Promise<Record<string, string>>;
  readonly reason: 'unauthorized' | 'token_expired';
}

const connectRows: ConnectRow[] = [
  { name: 'no token', query: async () => ({}), reason: 'unauthorized' },
  { name: 'a malformed token', query: async () => ({ jid: 'not.a.jwt' }), reason: 'unauthorized' },
  {
    name: 'a forged token (another secret)',
    query: async () => ({
      jid: await jwt()
        .setAudience(env.LAMBDACABLE_JWT_AUDIENCE)
        .setExpirationTime(now() + 600)
        .sign(new TextEncoder().encode('forged')),
    }),
    reason: 'unauthorized',
  },
  {
    name: 'an expired token',
    query: async () => ({
      jid: await jwt()
        .setAudience(env.LAMBDACABLE_JWT_AUDIENCE)
        .setExpirationTime(now() - 120)
        .sign(secret),
    }),
    reason: 'token_expired',
  },
  {
    name: 'a token without exp',
    query: async () => ({
      jid: await jwt().setAudience(env.LAMBDACABLE_JWT_AUDIENCE).sign(secret),
    }),
    reason: 'unauthorized',
  },
  {
    name: 'a token for another audience',
    query: async () => ({
      jid: await jwt()
        .setAudience('another-app')
        .setExpirationTime(now() + 600)
        .sign(secret),
    }),
    reason: 'unauthorized',
  },
];

describe('bad credentials: disconnect after the upgrade, then close', () => {
  it.each(connectRows)('$name: disconnect $reason', async ({ query, reason }) => {
    const c = await BadInputClient.open(await query());
    await until(() => c.closed, 20_000, 'the close');
    expect(c.frames).toEqual([{ type: 'disconnect', reason, reconnect: false }]);
    await goodClientStillServed();
  });

  it('a sid over 2 KB: a new session (welcome without restored), and the connection works', async () => {
    const c = await BadInputClient.welcomed({ sid: 'x'.repeat(3000) });
    expect(c.frames).toEqual([{ type: 'welcome', sid: expect.any(String) }]);
    expect(await c.subscribe(pubsub('after/sid'))).toEqual({
      type: 'confirm_subscription',
      identifier: pubsub('after/sid'),
    });
    await delivered(c, 'after/sid');
    await goodClientStillServed();
  });
});

interface HttpRow {
  readonly name: string;
  readonly body: () => string;
  readonly authorization?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly status: number;
  readonly response: string | RegExp;
  /** More proof that the system still works. */
  readonly after?: () => Promise<void>;
}

const httpRows: HttpRow[] = [
  {
    name: 'no key',
    body: () => '{"stream":"a","data":"1"}',
    authorization: '',
    status: 401,
    response: 'unauthorized',
  },
  {
    name: 'an empty body',
    body: () => '',
    status: 422,
    response: 'empty body: expected {"stream","data"} or an array',
  },
  { name: 'a malformed body', body: () => '{"stream":', status: 422, response: 'body is not JSON' },
  {
    name: `an Idempotency-Key over ${MAX_IDEMPOTENCY_KEY_CHARS} characters`,
    body: () => '{"stream":"a","data":"1"}',
    headers: { 'idempotency-key': 'k'.repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1) },
    status: 400,
    response: `Idempotency-Key is ${MAX_IDEMPOTENCY_KEY_CHARS + 1} characters, the limit is ${MAX_IDEMPOTENCY_KEY_CHARS}`,
  },
  {
    name: 'an empty array',
    body: () => '[]',
    status: 422,
    response: 'empty array: nothing to broadcast',
  },
  {
    name: `more than ${MAX_BROADCAST_ITEMS} items`,
    body: () =>
      JSON.stringify(
        Array.from({ length: MAX_BROADCAST_ITEMS + 1 }, (_, i) => ({ stream: `s${i}`, data: '1' })),
      ),
    status: 422,
    response: `${MAX_BROADCAST_ITEMS + 1} items, the limit is ${MAX_BROADCAST_ITEMS} per request: send the rest in more requests`,
  },
  {
    name: 'data that is no string',
    body: () => '{"stream":"a","data":{"x":1}}',
    status: 422,
    response: 'item: "data" must be a string (JSON-encode objects)',
  },
  {
    name: 'a 1 MB body',
    body: () => JSON.stringify({ stream: 'a', data: 'x'.repeat(1024 * 1024) }),
    status: 413,
    response: new RegExp(
      `^\\{"error":"body is \\d+ bytes, the limit is ${MAX_BROADCAST_BODY_BYTES}","what":"body","bytes":\\d+,"limit":${MAX_BROADCAST_BODY_BYTES}\\}$`,
    ),
  },
  {
    name: `data over ${MAX_BROADCAST_DATA_BYTES} bytes`,
    body: () => JSON.stringify({ stream: 'a', data: 'x'.repeat(MAX_BROADCAST_DATA_BYTES + 10) }),
    status: 413,
    // Not JSON: clients get it as a JSON string, quotes included.
    response: JSON.stringify({
      error: `item: "data" is ${MAX_BROADCAST_DATA_BYTES + 12} bytes, the limit is ${MAX_BROADCAST_DATA_BYTES}`,
      what: 'data',
      bytes: MAX_BROADCAST_DATA_BYTES + 12,
      limit: MAX_BROADCAST_DATA_BYTES,
    }),
  },
  {
    name: `a stream name over ${MAX_STREAM_BYTES} bytes`,
    body: () =>
      JSON.stringify([
        { stream: 'ok', data: '1' },
        { stream: 'é'.repeat(200), data: '1' },
      ]),
    status: 422,
    response: JSON.stringify({
      error: `item at index 1: "stream" is 400 bytes, the limit is ${MAX_STREAM_BYTES} (UTF-8)`,
      what: 'item at index 1: "stream"',
      bytes: 400,
      limit: MAX_STREAM_BYTES,
    }),
  },
  {
    name: 'a remote command over the limit',
    body: () =>
      JSON.stringify({
        command: 'disconnect',
        payload: { identity: 'x'.repeat(MAX_BROADCAST_DATA_BYTES) },
      }),
    status: 413,
    response: JSON.stringify({
      error: `item: the command is ${MAX_BROADCAST_DATA_BYTES + 25} bytes, the limit is ${MAX_BROADCAST_DATA_BYTES}`,
      what: 'command',
      bytes: MAX_BROADCAST_DATA_BYTES + 25,
      limit: MAX_BROADCAST_DATA_BYTES,
    }),
  },
  {
    // Keys no table could hold: the consumer finds nothing instead of failing forever.
    name: 'remote commands naming an identity, a connection and a stream over the key limits',
    body: () =>
      JSON.stringify([
        { command: 'disconnect', payload: { identity: 'i'.repeat(3000) } },
        { command: 'disconnect', payload: { connectionId: 'c'.repeat(3000) } },
        { command: 'unsubscribe', payload: { stream: 's'.repeat(3000) } },
      ]),
    status: 201,
    response: '',
    // The commands' partition is not stuck: the next remote command is carried out.
    after: async () => {
      const victim = await BadInputClient.open({
        jid: await jwt()
          .setSubject('victim')
          .setAudience(env.LAMBDACABLE_JWT_AUDIENCE)
          .setExpirationTime(now() + 600)
          .sign(secret),
      });
      await victim.next((f) => f.type === 'welcome', 'welcome');
      expect(
        await post(JSON.stringify({ command: 'disconnect', payload: { identity: 'victim' } })),
      ).toEqual({ status: 201, body: '' });
      await until(() => victim.closed, 20_000, 'the remote disconnect');
      expect(victim.frames.at(-1)).toEqual({
        type: 'disconnect',
        reason: 'remote',
        reconnect: true,
      });
    },
  },
];

describe('bad HTTP broadcasts: a client error with the reason', () => {
  it.each(httpRows)(
    '$name: $status',
    async ({ body, authorization, headers, status, response, after }) => {
      const answer = await post(body(), authorization, headers);
      expect(answer.status).toBe(status);
      if (typeof response === 'string') expect(answer.body).toBe(response);
      else expect(answer.body).toMatch(response);
      await after?.();
      await goodClientStillServed();
    },
  );
});

describe('stream names SQS would refuse as a group id are delivered, in order', () => {
  it.each([
    ['a space', 'chat room/1'],
    ['non-ASCII characters', 'café/über/🎉'],
    ['more than 128 characters', `long/${'l'.repeat(200)}`],
    ['exactly the limit of bytes', 'ü'.repeat(MAX_STREAM_BYTES / 2)],
  ])('%s', async (_, stream) => {
    const c = await BadInputClient.welcomed();
    expect(await c.subscribe(pubsub(stream))).toEqual({
      type: 'confirm_subscription',
      identifier: pubsub(stream),
    });
    const first = ++sequence;
    const body = JSON.stringify(
      [1, 2, 3].map((k) => ({ stream, data: JSON.stringify({ first, k }) })),
    );
    expect(await post(body)).toEqual({ status: 201, body: '' });
    await until(
      () => c.frames.filter((f) => (f.message as { first?: number })?.first === first).length === 3,
      20_000,
      `three broadcasts on ${stream.slice(0, 40)}`,
    );
    const got = c.frames.filter((f) => (f.message as { first?: number })?.first === first);
    expect(got.map((f) => (f.message as { k: number }).k)).toEqual([1, 2, 3]);
    expect(got.map((f) => f.offset)).toEqual([1, 2, 3]);
    expect(got.every((f) => f.stream_id === stream)).toBe(true);
    await goodClientStillServed();
  });
});
