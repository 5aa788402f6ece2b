import { readdirSync, readFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, LOCAL_HOST } from '../../infra/local/services';
import { freeStackPorts, PortInUseError, startLocalStack } from '../../infra/local/stack';

/** A listener on a port of its own, as another program on the machine would hold it. */
let other: Server;
let otherPort: number;

beforeAll(async () => {
  other = createServer((socket) => socket.end('still mine\n'));
  await new Promise<void>((resolve) => other.listen(0, LOCAL_HOST, resolve));
  otherPort = (other.address() as AddressInfo).port;
});

afterAll(() => {
  other?.close();
});

describe('freePort', () => {
  it('hands out distinct ports that can be listened on, below the ephemeral range on Linux', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    const low = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
    );
    // The OS hands outgoing connections ports from its ephemeral range: none of these.
    if (low > 21_000) for (const port of ports) expect(port).toBeLessThan(low);
    for (const port of ports.slice(0, 5)) {
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, LOCAL_HOST, resolve);
      });
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('startLocalStack with a bad port', () => {
  it('refuses a port variable that is no port, naming it, before it starts anything', async () => {
    const before = childrenOf(process.pid);
    const saved = process.env.LAMBDACABLE_LAMBDA_PORT;
    process.env.LAMBDACABLE_LAMBDA_PORT = '30OO';
    try {
      await expect(startLocalStack({ wsPort: 0, httpPort: 0, output: 'quiet' })).rejects.toThrow(
        'LAMBDACABLE_LAMBDA_PORT: 30OO is not a port (0 to 65535; 0 picks a free one)',
      );
    } finally {
      if (saved === undefined) delete process.env.LAMBDACABLE_LAMBDA_PORT;
      else process.env.LAMBDACABLE_LAMBDA_PORT = saved;
    }
    await expect(startLocalStack({ ...freeStackPorts(), sqsPort: 70_000 })).rejects.toThrow(
      'LAMBDACABLE_SQS_PORT: 70000 is not a port',
    );
    expect(childrenOf(process.pid)).toEqual(before);
  });
});

describe('startLocalStack on a port in use', () => {
  it('fails when DynamoDB Local cannot listen, and stops fauxqs, which did', async () => {
    const before = childrenOf(process.pid);
    const sqsPort = await freePort();
    const error = await startLocalStack({
      ...freeStackPorts(),
      dynamodbPort: otherPort,
      sqsPort,
      output: 'quiet',
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(String(error)).toContain(`Failed to bind to /127.0.0.1:${otherPort}`);
    // fauxqs started meanwhile: it no longer listens.
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(sqsPort, LOCAL_HOST);
      socket.on('connect', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
    expect(childrenOf(process.pid)).toEqual(before);
  }, 120_000);

  it('fails with an error naming the variable that sets the port, and leaves its owner be', async () => {
    const before = childrenOf(process.pid);
    const started = startLocalStack({
      ...freeStackPorts(),
      httpPort: otherPort,
      env: { LAMBDACABLE_BUILD_DIR: '.esbuild-ports-test' },
      output: 'quiet',
      watch: false,
    });
    const error = await started.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PortInUseError);
    expect((error as PortInUseError).port).toBe(otherPort);
    expect((error as Error).message).toBe(
      `port ${otherPort} (LAMBDACABLE_HTTP_PORT) is in use on ${LOCAL_HOST}: stop what listens ` +
        'on it, or set LAMBDACABLE_HTTP_PORT to another port (0 picks a free one)',
    );
    // The program that holds the port still serves on it.
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = connect(otherPort, LOCAL_HOST);
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
      });
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(reply).toBe('still mine\n');
    // Nothing it started is left running: not DynamoDB Local's JVM, nor serverless-offline.
    expect(childrenOf(process.pid)).toEqual(before);
  }, 180_000);
});

/** The pids of the live processes whose parent is `pid` (Linux's /proc). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === pid && state !== 'Z') children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children.sort((a, b) => a - b);
}
