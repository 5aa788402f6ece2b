import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../infra/local/services';
import { freeStackPorts, type LocalStack, startLocalStack } from '../../infra/local/stack';
import { recordFromItem } from '../../lib/adapters/aws/dynamodb/outbox';
import { DynamoSchemaRegistry } from '../../lib/aws';
import { AvroCodec, BROADCAST_TOPIC, createConnectToken, signStreamName } from '../../lib/core';
import { anycableClients, collect, until } from '../helpers/cable';
import { OrderPlaced } from '../helpers/events';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const tsxCli = join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs');
const tscCli = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
/** The page that holds the service example, and the marker right before it. */
const EXAMPLE_PAGE = 'docs/events.md';
const EXAMPLE_MARKER = '<!-- example: place-order -->';

const secrets = {
  LAMBDACABLE_JWT_SECRET: 'package-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'package-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'package-broadcast-key-0123456789abcdef0123456789',
};

let work: string | undefined;
let app: string;
let tarball: string;
let stack: LocalStack | undefined;
let dynamodb: DynamoDBClient;
let clients: ReturnType<typeof anycableClients> | undefined;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'lambdacable-package-example-'));
  const dir = work;
  // Packing and installing take as long as the stack's start: do both at once.
  const [started, installed] = await Promise.allSettled([
    startLocalStack({ ...freeStackPorts(), env: secrets, output: 'quiet', watch: false }),
    (async () => {
      tarball = await packLibrary(dir);
      app = await consumerProject(dir, tarball);
    })(),
  ]);
  if (started.status === 'fulfilled') stack = started.value;
  if (started.status === 'rejected') throw started.reason;
  if (installed.status === 'rejected') throw installed.reason;
  dynamodb = new DynamoDBClient({
    endpoint: stack!.dynamodbEndpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  clients = anycableClients(stack!.wsUrl);
}, 300_000);

afterAll(async () => {
  clients?.disconnectAll();
  dynamodb?.destroy();
  await stack?.stop();
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

describe('the lambdacable npm package, installed from its tarball into a new project', () => {
  it('holds the built entry points with their .d.ts and no tests, functions or infra', async () => {
    const files = (await run('tar', ['-tzf', tarball], { cwd: work! })).stdout
      .split('\n')
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, ''));
    for (const entry of ['core', 'aws', 'testing']) {
      expect(files).toContain(`dist/${entry}.js`);
      expect(files).toContain(`dist/${entry}.d.ts`);
    }
    expect(files).toContain('package.json');
    expect(files).toContain('README.md');
    // Besides the build and its sources (for the declaration maps): what npm always packs. The
    // docs/ pages stay in the repository, where the README links to them.
    expect(
      files.filter((f) => !/^(dist|lib)\/|^(package\.json|README\.md|LICENSE.*)$/.test(f)),
    ).toEqual([]);
    expect(files.filter((f) => /\.test\.|(^|\/)(test|functions|infra|bench)\//.test(f))).toEqual(
      [],
    );

    const installed = join(app, 'node_modules', 'lambdacable');
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as {
      main: string;
      types: string;
      exports: Record<string, string | { types: string; default: string }>;
    };
    const targets: typeof manifest.exports = {
      ...manifest.exports,
      main: manifest.main,
      types: manifest.types,
    };
    for (const [subpath, target] of Object.entries(targets)) {
      const paths = typeof target === 'string' ? [target] : [target.types, target.default];
      for (const path of paths) {
        expect(existsSync(join(installed, path)), `${subpath} → ${path}`).toBe(true);
      }
    }
  });

  it('resolves lambdacable, lambdacable/aws and lambdacable/testing with node, and no deep import', async () => {
    const probe = `
      const entries = {};
      for (const name of ['lambdacable', 'lambdacable/aws', 'lambdacable/testing']) {
        entries[name] = Object.keys(await import(name));
      }
      let deep = 'resolved';
      try { await import('lambdacable/dist/core.js'); } catch (error) { deep = error.code; }
      console.log(JSON.stringify({ entries, deep }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], {
      cwd: app,
    });
    const { entries, deep } = JSON.parse(stdout) as {
      entries: Record<string, string[]>;
      deep: string;
    };
    expect(entries.lambdacable).toEqual(
      expect.arrayContaining([
        'AckManager',
        'BroadcastEvent',
        'EventTopics',
        'createConnectToken',
        'createEventSender',
        'defineEvent',
        'signStreamName',
      ]),
    );
    expect(entries['lambdacable/aws']).toEqual(
      expect.arrayContaining([
        'DynamoBroker',
        'DynamoOutbox',
        'DynamoSchemaRegistry',
        'OutboxRelay',
        'consumeSqsBatch',
      ]),
    );
    expect(entries['lambdacable/testing']).toEqual(
      expect.arrayContaining(['MemoryBroker', 'MemoryOutbox', 'MemorySchemaRegistry']),
    );
    // The core stays free of the AWS adapters.
    expect(entries.lambdacable).not.toContain('DynamoOutbox');
    expect(deep).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('type-checks a consumer and the docs/events.md example with tsc under moduleResolution nodenext', async () => {
    await writeFile(
      join(app, 'consumer.ts'),
      `import {
  AckManager,
  type Broadcaster,
  defineEvent,
  type EventSender,
  EventTopics,
} from 'lambdacable';
import { DynamoOutbox, type DynamoOutboxOptions } from 'lambdacable/aws';
import { MemoryBroker, MemorySchemaRegistry } from 'lambdacable/testing';
// @ts-expect-error only the entry points are exported
import { defineEvent as deep } from 'lambdacable/dist/core.js';

const Ping = defineEvent<{ n: number }>({
  name: 'test.Ping',
  topic: 'pings',
  schema: { type: 'record', fields: [{ name: 'n', type: 'int' }] },
});
export const topics: EventTopics = new EventTopics().register(Ping);
export const level: bigint = new AckManager().getAckLevel();
const options: DynamoOutboxOptions = { tableName: 'outbox' };
export const outbox = new DynamoOutbox(options);
const broadcaster: Broadcaster = {
  broadcast() {},
  broadcastCommand() {},
  subscribe() {},
  unsubscribe() {},
};
export const broker = new MemoryBroker({ broadcaster });
export const registry = new MemorySchemaRegistry();
export type Sender = EventSender<unknown>;
export const ping = Ping.of({ n: 1 });
// @ts-expect-error the types are real, not any: a Ping carries a number
Ping.of({ n: 'one' });
export { deep };
`,
    );
    await writeFile(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          noEmit: true,
          // The package's own .d.ts are checked too: a type they name must ship with it.
          skipLibCheck: false,
          types: ['node'],
        },
        files: ['consumer.ts', 'place-order.ts'],
      }),
    );
    await writeFile(join(app, 'place-order.ts'), await pageExample());
    const result = await run(process.execPath, [tscCli, '-p', 'tsconfig.json'], {
      cwd: app,
      check: false,
    });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.code).toBe(0);
  }, 120_000);

  it("runs the docs/events.md example: its transaction's broadcast reaches a client subscribed to orders/o-1 through the stack, and the outbox holds its OrderPlaced; a second run is cancelled and adds nothing", async () => {
    const c = clients!.cable(
      await createConnectToken(
        { sub: 'newcomer', ttlSeconds: 600 },
        secrets.LAMBDACABLE_JWT_SECRET,
      ),
    );
    await c.connect();
    const channel = c.streamFromSigned(
      signStreamName('orders/o-1', secrets.LAMBDACABLE_STREAMS_SECRET),
    );
    const got = collect(channel);
    await channel.ensureSubscribed();

    const script = join(app, 'place-order.ts');
    await writeFile(script, await pageExample());
    // Only the endpoint is given: the table names are the example's defaults.
    const env = { ...cleanEnv(), DYNAMODB_ENDPOINT: stack!.dynamodbEndpoint };
    const first = await run(process.execPath, [tsxCli, script], { cwd: app, env, check: false });
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('order o-1 placed');

    await until(() => got.messages.length >= 1, 30_000, 'the broadcast of the example');
    expect(got.messages).toEqual([{ placed: 'o-1' }]);

    const outbox = async () =>
      (
        (await dynamodb.send(new ScanCommand({ TableName: stack!.resources.tables.outbox })))
          .Items ?? []
      ).map(recordFromItem);
    const records = await outbox();
    const placed = records.filter((r) => r.type === OrderPlaced.name);
    expect(placed).toHaveLength(1);
    expect(placed[0]).toMatchObject({ topic: 'orders', key: 'o-1' });
    const codec = new AvroCodec(
      new DynamoSchemaRegistry({ client: dynamodb, tableName: stack!.resources.tables.schemas }),
    );
    expect(await codec.decode(placed[0]!.payload, OrderPlaced)).toEqual({
      orderId: 'o-1',
      amount: 5,
    });
    expect(
      records.filter((r) => r.topic === BROADCAST_TOPIC && r.key === 'orders/o-1'),
    ).toHaveLength(1);
    const order = await dynamodb.send(
      new GetItemCommand({ TableName: 'orders', Key: { pk: { S: 'o-1' } } }),
    );
    expect(order.Item).toEqual({ pk: { S: 'o-1' }, amount: { N: '5' } });

    const second = await run(process.execPath, [tsxCli, script], { cwd: app, env, check: false });
    expect(second.code).toBe(1);
    expect(second.stderr).toContain('order o-1 not placed');
    expect(await outbox()).toHaveLength(records.length);
    expect(got.messages).toEqual([{ placed: 'o-1' }]);
  }, 90_000);
});

/** The code block after {@link EXAMPLE_MARKER} in {@link EXAMPLE_PAGE}, exactly. */
async function pageExample(): Promise<string> {
  const page = await readFile(join(root, EXAMPLE_PAGE), 'utf8');
  const at = page.indexOf(EXAMPLE_MARKER);
  if (at < 0) throw new Error(`${EXAMPLE_PAGE} has no ${EXAMPLE_MARKER}`);
  const block = /^\s*```ts\n([\s\S]*?)\n```\n/.exec(page.slice(at + EXAMPLE_MARKER.length));
  if (!block) throw new Error(`${EXAMPLE_PAGE}: no \`\`\`ts block right after ${EXAMPLE_MARKER}`);
  return `${block[1]}\n`;
}

/** `npm pack` of the repository (its prepack builds dist/) into `dir`; the tarball's path. */
async function packLibrary(dir: string): Promise<string> {
  const out = join(dir, 'pack');
  await mkdir(out);
  await run('npm', ['pack', '--pack-destination', out], { cwd: root, env: cleanEnv() });
  const [name, ...more] = (await readdir(out)).filter((f) => f.endsWith('.tgz'));
  if (!name || more.length > 0) throw new Error(`npm pack made ${[name, ...more].join(', ')}`);
  return join(out, name);
}

/**
 * A new ESM project that installs the tarball as a user would, with what the docs example
 * imports besides it (`@aws-sdk/client-dynamodb`, as the library pins it, so npm dedupes it)
 * and the Node types a TypeScript consumer has.
 */
async function consumerProject(dir: string, tgz: string): Promise<string> {
  const project = join(dir, 'app');
  await mkdir(project);
  await writeFile(
    join(project, 'package.json'),
    JSON.stringify({ name: 'lambdacable-consumer', private: true, type: 'module' }),
  );
  const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  const pinned = (name: string, versions: Record<string, string>) => `${name}@${versions[name]}`;
  await run(
    'npm',
    [
      'install',
      tgz,
      pinned('@aws-sdk/client-dynamodb', manifest.dependencies),
      pinned('@types/node', manifest.devDependencies),
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
    ],
    { cwd: project, env: cleanEnv() },
  );
  return project;
}

/**
 * This process's environment without what would point a child elsewhere: AWS settings (the
 * example must work with its own defaults) and the variables of an enclosing `npm run`.
 */
function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^(AWS_|LAMBDACABLE_|npm_package_|npm_lifecycle_)/.test(name))
      continue;
    if (/^npm_config_(local_|global_)?prefix$/i.test(name) || name === 'INIT_CWD') continue;
    env[name] = value;
  }
  // The example's stderr must be empty; on Node 20 the SDK would add its (expected)
  // notice that it soon needs Node 22. Users see it; this assertion does not.
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  return env;
}

interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end; with `check` (the default) a non-zero exit throws with the output. */
function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string>; check?: boolean },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => {
      const result = { code, stdout, stderr };
      if (code !== 0 && options.check !== false) {
        reject(
          new Error(`${command} ${args.join(' ')} exited with ${code}:\n${stdout}\n${stderr}`),
        );
      } else resolve(result);
    });
  });
}
