import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PostToConnectionCommand } from '@aws-sdk/client-apigatewaymanagementapi';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { managementClient, POST_TIMEOUTS } from '../../../functions/runtime/clients';

/** A loopback server that takes every request and never answers it. */
let silent: Server;
let endpoint = '';
beforeAll(async () => {
  silent = createServer(() => {});
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
});
afterAll(async () => {
  vi.unstubAllEnvs();
  silent.closeAllConnections();
  await new Promise((r) => silent.close(r));
});

describe('managementClient (the fan-out posts)', () => {
  it('gives up on a post the endpoint never answers, with a TimeoutError', async () => {
    // What Lambda's environment gives the client.
    vi.stubEnv('AWS_REGION', 'us-east-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'local');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
    const client = managementClient((c) => c, endpoint);
    const started = Date.now();
    const post = client.send(
      new PostToConnectionCommand({ ConnectionId: 'c1', Data: new TextEncoder().encode('{}') }),
    );
    await expect(post).rejects.toMatchObject({ name: 'TimeoutError' });
    // It waited for the answer for the request timeout (not a connection failure at once).
    expect(Date.now() - started).toBeGreaterThanOrEqual(POST_TIMEOUTS.requestTimeout - 100);
  }, 15_000);
});
