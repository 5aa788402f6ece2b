import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Cable, createCable } from '@anycable/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { freeStackPorts, type LocalStack, startLocalStack } from '../../infra/local/stack';
import type { RecordedCall } from '../../lib/adapters/aws/call-log';
import { createConnectToken, signStreamName } from '../../lib/core';

const env = {
  LAMBDACABLE_JWT_SECRET: 'capacity-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'capacity-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'capacity-broadcast-key-0123456789abcdef0123456789',
};
const CLIENTS = 200;
/** Every AWS call of this run, with the function that made it. */
const callLog = join(tmpdir(), `lambdacable-capacity-calls-${process.pid}.jsonl`);

let stack: LocalStack;
const cables: Cable[] = [];

/**
 * `subscribe` frames the crowd sent: one each, and one more for each client that got no
 * answer within its 5 s and sent its subscribe again (on a loaded machine a few do).
 */
let subscribeFrames = 0;
class CountingWebSocket extends WebSocket {
  override send(data: unknown, ...rest: unknown[]): void {
    if (typeof data === 'string' && data.includes('"command":"subscribe"')) subscribeFrames += 1;
    (super.send as (...args: unknown[]) => void)(data, ...rest);
  }
}

beforeAll(async () => {
  await rm(callLog, { force: true });
  stack = await startLocalStack({
    ...freeStackPorts(),
    env: { ...env, LAMBDACABLE_AWS_CALL_LOG: callLog },
    output: 'quiet',
    watch: false,
  });
}, 240_000);

afterAll(async () => {
  for (const c of cables.splice(0)) c.disconnect();
  await stack?.stop();
  await rm(callLog, { force: true });
}, 60_000);

describe('the local stack under a crowd', () => {
  it(`welcomes ${CLIENTS} default-configured @anycable/core clients connecting at once, and confirms each one's subscription to a signed stream, once, and delivers the next broadcast to all`, async () => {
    const stream = 'capacity/1';
    const signed = signStreamName(stream, env.LAMBDACABLE_STREAMS_SECRET);
    const tokens = await Promise.all(
      Array.from({ length: CLIENTS }, (_, i) =>
        createConnectToken({ sub: `crowd-${i}`, ttlSeconds: 600 }, env.LAMBDACABLE_JWT_SECRET),
      ),
    );
    // The client's defaults, monitor included: no welcome within its stale threshold (6 s)
    // makes it reconnect, and a subscription under way then fails.
    const crowd = tokens.map((token) => {
      const c = createCable(stack.wsUrl, {
        websocketImplementation: CountingWebSocket,
        protocol: 'actioncable-v1-ext-json',
        logLevel: 'error',
        auth: { token },
      });
      cables.push(c);
      return c;
    });
    const disconnects: string[] = [];
    for (const c of crowd) {
      c.on('disconnect', (event: { reason?: string }) => disconnects.push(event.reason ?? '?'));
    }
    const channels = crowd.map((c) => c.streamFromSigned(signed));
    const received = crowd.map(() => [] as unknown[]);
    channels.forEach((ch, i) => {
      ch.on('message', (m: unknown) => received[i]!.push(m));
    });
    // A client that never settles fails here, with its cable's state: `connecting` is a
    // welcome that never came (the client waits for it indefinitely), `disconnected` one
    // reconnecting over and over.
    const within = (ms: number, cable: Cable) =>
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`not subscribed in ${ms} ms (${cable.state})`)), ms),
      );
    const outcomes = await Promise.allSettled(
      channels.map((ch, i) => Promise.race([ch.ensureSubscribed(), within(90_000, crowd[i]!)])),
    );
    const failures = outcomes.flatMap((o) => (o.status === 'rejected' ? [String(o.reason)] : []));
    expect(failures).toEqual([]);
    expect(disconnects).toEqual([]);
    expect(crowd.every((c) => c.state === 'connected')).toBe(true);

    // Every one of them gets the next broadcast, once. Subscribes slower than the client's
    // 5 s retry used to be confirmed twice, and the client unsubscribed on the second confirm.
    const res = await fetch(`${stack.httpUrl}/_broadcast`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.LAMBDACABLE_BROADCAST_KEY}` },
      body: JSON.stringify({ stream, data: JSON.stringify({ to: 'all' }) }),
    });
    expect(res.status).toBe(201);
    await expect
      .poll(() => received.filter((r) => r.length > 0).length, { timeout: 30_000, interval: 200 })
      .toBe(CLIENTS);
    expect(received.every((r) => r.length === 1)).toBe(true);
    expect(received[0]).toEqual([{ to: 'all' }]);

    // The functions run in one process: each must still have read its own environment
    // (AWS_LAMBDA_FUNCTION_NAME names the caller in the log), though 200 of each ran at once.
    const calls = (await readFile(callLog, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as RecordedCall);
    const count = (fn: string, operation: string) =>
      calls.filter((c) => c.function === `lambdacable-local-${fn}` && c.operation === operation)
        .length;
    // No Lambda is invoked per connect: the pinger welcomes the connections it reads.
    expect(calls.filter((c) => c.operation === 'Invoke')).toEqual([]);
    expect(count('wsConnect', 'PutItem')).toBe(2 * CLIENTS); // the connection, the session
    expect(count('wsConnect', 'PostToConnection')).toBe(0);
    expect(count('pinger', 'PostToConnection')).toBeGreaterThanOrEqual(CLIENTS);
    // Each subscribe frame puts its subscription once (a repeated one is refused by the Put's
    // condition), and none rewrites the session.
    expect(subscribeFrames).toBeGreaterThanOrEqual(CLIENTS);
    expect(count('wsDefault', 'PutItem')).toBe(subscribeFrames);
    expect(count('wsDefault', 'DeleteItem')).toBe(0); // no unsubscribe, no rollback
  }, 180_000);
});
