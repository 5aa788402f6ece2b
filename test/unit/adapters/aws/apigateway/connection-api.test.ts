import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ApiGatewayConnectionApi } from '../../../../../lib/aws';
import { AwsResourceError, ThrottledError } from '../../../../../lib/core';

/**
 * Fault injection at the HTTP layer: serverless-offline answers 410 for unknown connections
 * (the e2e suite covers that), but cannot produce throttling or server errors.
 */
function api(statuses: number[], seen: string[] = []) {
  const queue = [...statuses];
  return new ApiGatewayConnectionApi({
    endpoint: 'http://127.0.0.1:9/local',
    backoffMs: 1,
    clientConfig: {
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
      requestHandler: {
        handle: async (request: { method: string; path: string }) => {
          seen.push(`${request.method} ${request.path}`);
          const statusCode = queue.shift() ?? 200;
          const name =
            statusCode === 429
              ? 'LimitExceededException'
              : statusCode === 410
                ? 'GoneException'
                : '';
          return {
            // The SDK reads a response by shape: status, headers, body.
            response: {
              statusCode,
              headers: name ? { 'x-amzn-errortype': name, 'content-type': 'application/json' } : {},
              body: Buffer.from(name ? JSON.stringify({ message: name }) : ''),
            },
          };
        },
      },
    },
  });
}

describe('ApiGatewayConnectionApi', () => {
  it('posts a frame to the connection', async () => {
    const seen: string[] = [];
    expect(await api([200], seen).post('abc=', '{"type":"ping"}')).toBe('sent');
    expect(seen).toEqual(['POST /local/@connections/abc%3D']);
  });

  it('sends each call its own input through the cached middleware chain (cacheMiddleware)', async () => {
    const seen: string[] = [];
    const a = api([], seen);
    await a.post('first', '{}');
    await a.post('second', '{}');
    await a.close('third');
    await a.post('fourth', '{}');
    expect(seen).toEqual([
      'POST /local/@connections/first',
      'POST /local/@connections/second',
      'DELETE /local/@connections/third',
      'POST /local/@connections/fourth',
    ]);
  });

  it('says gone for a 410', async () => {
    expect(await api([410]).post('gone', '{}')).toBe('gone');
  });

  it('backs off and retries when throttled, then delivers', async () => {
    const seen: string[] = [];
    expect(await api([429, 429, 200], seen).post('c1', '{}')).toBe('sent');
    expect(seen).toHaveLength(3);
  });

  it('gives up after maxAttempts throttled calls with an AwsResourceError naming the connection', async () => {
    const error = await api([429, 429, 429, 429, 429, 429])
      .post('c2', '{}')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AwsResourceError);
    // The fan-out tries a ThrottledError again in a later pass: nothing was delivered.
    expect(error).toBeInstanceOf(ThrottledError);
    expect((error as AwsResourceError).ids).toEqual(['c2']);
    expect((error as Error).message).toMatch(/LimitExceededException/);
  });

  it("retries a server error as it does a throttle (with the SDK client's own retries off)", async () => {
    const seen: string[] = [];
    expect(await api([500, 200], seen).post('c3', '{}')).toBe('sent');
    expect(seen).toHaveLength(2);
  });

  it('turns a lasting server error into an AwsResourceError that is no ThrottledError', async () => {
    const seen: string[] = [];
    const error = await api([500, 502, 503, 500, 500], seen)
      .post('c3', '{}')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AwsResourceError);
    expect(error).not.toBeInstanceOf(ThrottledError);
    expect(seen).toHaveLength(5);
  });

  it('retries a post whose socket is reset (a keep-alive socket the endpoint closed), then delivers', async () => {
    // A real HTTP endpoint on loopback and the SDK's own HTTP handler: the first `resets`
    // requests have their socket destroyed (the client sees ECONNRESET, which the SDK names
    // TimeoutError), as when a reused keep-alive socket was closed by the server while idle.
    const endpoint = async (resets: number) => {
      const seen: string[] = [];
      const server = createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`);
        if (seen.length <= resets) {
          req.socket.destroy();
          return;
        }
        res.writeHead(200).end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const client = new ApiGatewayConnectionApi({
        endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/local`,
        backoffMs: 1,
        clientConfig: {
          region: 'us-east-1',
          credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        },
      });
      const done = () => {
        client.destroy();
        server.closeAllConnections();
        return new Promise((r) => server.close(r));
      };
      return { client, seen, done };
    };
    const once = await endpoint(1);
    expect(await once.client.post('c5', '{"type":"presence"}')).toBe('sent');
    expect(once.seen).toEqual(['POST /local/@connections/c5', 'POST /local/@connections/c5']);
    await once.done();

    // Reset on every attempt: an AwsResourceError naming the cause, after maxAttempts (5).
    const always = await endpoint(Number.POSITIVE_INFINITY);
    const error = await always.client.post('c6', '{}').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AwsResourceError);
    expect(error).not.toBeInstanceOf(ThrottledError);
    expect((error as Error).message).toMatch(/failed for c6: TimeoutError ECONNRESET/);
    expect(always.seen).toHaveLength(5);
    await always.done();
  });

  it('closes a connection with DeleteConnection', async () => {
    const seen: string[] = [];
    await api([204], seen).close('c4');
    expect(seen).toEqual(['DELETE /local/@connections/c4']);
  });
});
