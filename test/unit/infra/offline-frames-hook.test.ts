import { spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { FRAMES_REQUEST_TEMPLATE } from '../../../infra/deploy/websocket/frames-template';
import {
  BINARY_FRAME_CLOSE_CODE,
  FRAMES_VARIABLE,
  framesSettings,
  hookFrames,
  hookWebSocketClients,
} from '../../../infra/local/offline/frames-hook.mjs';
import {
  type FramesIntegration,
  FramesIntegrationError,
} from '../../../infra/local/offline/frames-integration.mjs';
import {
  OFFLINE_HOOK_ERROR,
  WEB_SOCKET_CLIENTS_FILE,
} from '../../../infra/local/offline/hook-check.mjs';
import { offlineFramesVariable } from '../../../infra/local/offline/launch';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../infra/local/services';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const clientsUrl = pathToFileURL(
  join(root, 'node_modules', 'serverless-offline', WEB_SOCKET_CLIENTS_FILE),
).href;
// serverless-offline's own class, untyped (a private file of the package).
const { default: OfflineClients } = (await import(clientsUrl)) as {
  default: new (serverless: unknown, options: unknown, lambda: unknown) => OfflineClientsLike;
};

interface OfflineClientsLike {
  addClient(client: unknown, connectionId: string): void;
  addRoute(functionKey: string, definition: { route: string }): void;
}

/** serverless-offline's WebSocketClients, hooked: a subclass, so its prototype stays as it is. */
function hookedClients(
  integration: Pick<FramesIntegration, 'receive'>,
  log: (line: string) => void = () => {},
  idleTimeoutSeconds = 600,
) {
  class Clients extends OfflineClients {}
  hookWebSocketClients(Clients, integration, log);
  return new Clients(
    { service: { provider: { websocketsApiRouteSelectionExpression: '$request.body.command' } } },
    { webSocketIdleTimeout: idleTimeoutSeconds, webSocketHardTimeout: 7200, noAuth: true },
    { get: () => undefined },
  );
}

/** Frames as the integration received them. */
function recording(fail?: (body: string) => boolean) {
  const received: { connectionId: string; body: string; connectedAt?: number }[] = [];
  return {
    received,
    receive: async (connectionId: string, body: string, c?: { connectedAt?: number }) => {
      received.push({ connectionId, body, connectedAt: c?.connectedAt });
      if (fail?.(body)) {
        throw new FramesIntegrationError('frame req-1 of connection c-1 was not sent: down', {
          connectionId,
          requestId: 'req-1',
        });
      }
    },
  };
}

const servers: WebSocketServer[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const s of servers.splice(0)) {
    for (const c of s.clients) c.terminate();
    await new Promise((r) => s.close(r));
  }
});

/** A ws server whose connections are added to `clients`, and a client connected to it. */
async function connected(clients: OfflineClientsLike, connectionId = 'c-1') {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  await new Promise((r) => server.once('listening', r));
  server.on('connection', (socket) => clients.addClient(socket, connectionId));
  const { port } = server.address() as AddressInfo;
  const client = new WebSocket(`ws://127.0.0.1:${port}`);
  await new Promise((r) => client.once('open', r));
  const frames: string[] = [];
  client.on('message', (data) => frames.push(String(data)));
  const closed = new Promise<number>((r) => client.once('close', (code) => r(code)));
  return { client, frames, closed };
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
};

describe("npm start: serverless-offline's frames to the SQS integration (frames-hook.mjs)", () => {
  it('hands every text frame to the integration, in order, with the connection', async () => {
    const integration = recording();
    const { client } = await connected(hookedClients(integration), 'conn=1');
    const bodies = ['{"command":"subscribe"}', 'ü & = + 😀', '', '{"command":"message"}'];
    for (const body of bodies) client.send(body);
    await until(() => integration.received.length === bodies.length);
    expect(integration.received.map((r) => [r.connectionId, r.body])).toEqual(
      bodies.map((b) => ['conn=1', b]),
    );
    expect(integration.received[0]?.connectedAt).toBeTypeOf('number');
  });

  it("answers a frame the integration failed with API Gateway's error frame, and logs it", async () => {
    const integration = recording((body) => body === 'bad');
    const logged: string[] = [];
    const { client, frames } = await connected(hookedClients(integration, (l) => logged.push(l)));
    client.send('bad');
    client.send('good');
    await until(() => frames.length === 1 && integration.received.length === 2);
    expect(frames.map((f) => JSON.parse(f))).toEqual([
      { message: 'Internal server error', connectionId: 'c-1', requestId: 'req-1' },
    ]);
    expect(logged).toEqual([
      'lambdacable offline: frame req-1 of connection c-1 was not sent: down',
    ]);
  });

  it('closes the connection with 1003 on a binary frame, as API Gateway does, sending nothing', async () => {
    const integration = recording();
    const { client, closed } = await connected(hookedClients(integration));
    client.send(Buffer.from('{"command":"subscribe"}'), { binary: true });
    expect(await closed).toBe(BINARY_FRAME_CLOSE_CODE);
    expect(integration.received).toEqual([]);
  });

  it("still runs serverless-offline's listener, whose reset of the idle timeout keeps the socket", () => {
    vi.useFakeTimers();
    const clients = hookedClients(recording(), () => {}, 600);
    const socket = Object.assign(new EventEmitter(), {
      closedWith: undefined as number | undefined,
      close(code: number) {
        this.closedWith = code;
      },
    });
    clients.addClient(socket, 'c-1');
    expect(Object.hasOwn(socket, 'on')).toBe(false);
    vi.advanceTimersByTime(500_000);
    socket.emit('message', Buffer.from('{"command":"message"}'), false);
    vi.advanceTimersByTime(500_000);
    expect(socket.closedWith).toBeUndefined();
    vi.advanceTimersByTime(100_001);
    expect(socket.closedWith).toBe(1001);
    socket.emit('close');
  });

  it('refuses a function for any route but $connect and $disconnect: it would get the frames too', () => {
    const clients = hookedClients(recording());
    clients.addRoute('wsConnect', { route: '$connect' });
    clients.addRoute('wsDisconnect', { route: '$disconnect' });
    expect(() => clients.addRoute('wsDefault', { route: '$default' })).toThrow(
      `${OFFLINE_HOOK_ERROR}: ${FRAMES_VARIABLE}: the function wsDefault declares the ` +
        'WebSocket route $default, but every frame goes to the frames queue',
    );
    expect(() => clients.addRoute('wsSubscribe', { route: 'subscribe' })).toThrow(
      'declares the WebSocket route subscribe',
    );
  });

  it('fails loudly when addClient registered no "message" listener it could replace', () => {
    class Elsewhere {
      addClient(client: EventEmitter) {
        client.on('data', () => {});
      }
      addRoute() {}
    }
    hookWebSocketClients(Elsewhere, recording());
    expect(() => new Elsewhere().addClient(new EventEmitter())).toThrow(
      'WebSocketClients.addClient registered 0 "message" listeners, 1 expected',
    );
  });
});

describe('npm start: LAMBDACABLE_OFFLINE_FRAMES (frames-hook.mjs, launch.ts)', () => {
  const queueUrl = 'http://127.0.0.1:9324/000000000000/lambdacable-local-frames.fifo';

  it("is written by launch.ts with the deploy's template and read back whole", () => {
    const text = offlineFramesVariable({ queueUrl, sqsEndpoint: 'http://127.0.0.1:9324' });
    expect(framesSettings(text)).toEqual({
      queueUrl,
      endpoint: 'http://127.0.0.1:9324',
      region: LOCAL_REGION,
      template: FRAMES_REQUEST_TEMPLATE,
      credentials: LOCAL_CREDENTIALS,
    });
  });

  it('names what is missing or not JSON', () => {
    expect(() => framesSettings('{"queueUrl":"q","template":7}')).toThrow(
      `${FRAMES_VARIABLE} has no endpoint, region, template, credentials.accessKeyId, ` +
        'credentials.secretAccessKey (strings expected)',
    );
    expect(() => framesSettings('queueUrl=q')).toThrow(`${FRAMES_VARIABLE} is not JSON`);
  });

  it('makes hookFrames return the reason, as the other hook problems', async () => {
    const settings = JSON.parse(
      offlineFramesVariable({ queueUrl, sqsEndpoint: 'http://127.0.0.1:9324' }),
    );
    class Clients extends OfflineClients {}
    const problem = await hookFrames(
      JSON.stringify({ ...settings, template: "MessageBody=$input.json('$')" }),
      Clients,
    );
    expect(problem).toBe(
      `${OFFLINE_HOOK_ERROR}: ${FRAMES_VARIABLE}: unsupported VTL in the request template at ` +
        "12: $input.json('$') (the local stack renders $context.<name>, $input.body and " +
        '$util.urlEncode of either, nothing else)',
    );
    expect(Object.hasOwn(Clients.prototype, 'addClient')).toBe(false);
    expect(await hookFrames(JSON.stringify(settings), Clients)).toBeUndefined();
    expect(Object.hasOwn(Clients.prototype, 'addClient')).toBe(true);
  });

  it("makes the preload hook serverless-offline's WebSocketClients, or exit with the reason", () => {
    const preload = pathToFileURL(join(root, 'infra', 'local', 'offline', 'preload.mjs')).href;
    const probe =
      `const { default: C } = await import(${JSON.stringify(clientsUrl)});\n` +
      'console.log(String(C.prototype.addClient).includes("replaced"));';
    const run = (frames: string) =>
      spawnSync(process.execPath, ['--import', preload, '--input-type=module', '-e', probe], {
        encoding: 'utf8',
        timeout: 20_000,
        env: { ...process.env, [FRAMES_VARIABLE]: frames },
      });
    const variable = offlineFramesVariable({ queueUrl, sqsEndpoint: 'http://127.0.0.1:9324' });
    expect(run('').stdout).toBe('false\n');
    const hooked = run(variable);
    // Its stderr may hold the SDK's warnings about the Node.js version, nothing of the hook.
    expect(hooked.stderr).not.toContain('lambdacable');
    expect(hooked.status).toBe(0);
    expect(hooked.stdout).toBe('true\n');
    const refused = run(JSON.stringify({ ...JSON.parse(variable), template: '#set($a = 1)' }));
    expect(refused.status).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `${OFFLINE_HOOK_ERROR}: ${FRAMES_VARIABLE}: unsupported VTL in the request template at ` +
        '0: #set($a = 1) (the local stack renders $context.<name>, $input.body and ' +
        '$util.urlEncode of either, nothing else)\n',
    );
  });
});
