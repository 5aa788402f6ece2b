/**
 * Starts serverless-offline for the local stack: the WebSocket API, the HTTP broadcast route
 * and the functions, on the ports it is given or picks, in a process group of its own that
 * stops with this process; resolves once it answers on every port.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LambdacableError } from '../../../lib/core';
import { consumerGroupsFor } from '../../deploy/consumers';
import { FRAMES_REQUEST_TEMPLATE } from '../../deploy/websocket/frames-template';
import { LOCAL_PREFIX, LOCAL_STAGE } from '../environment';
import { freePort, LOCAL_HOST, type OfflinePorts, PORT_VARIABLES, PortInUseError } from '../ports';
import { hasExited, isHalting, killTree, stopProcess, within } from '../processes';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../services';
import { FRAMES_VARIABLE, type FramesSettings } from './frames-hook.mjs';
import { OFFLINE_HOOK_ERROR } from './hook-check.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..', '..');

/** How serverless-offline is run and watched (options of `startLocalStack`). */
export interface OfflineOptions {
  /** Where serverless-offline's output goes. @default inherited (printed) */
  readonly output?: 'inherit' | 'quiet';
  /** Also hands serverless-offline's output (the functions' logs) here, chunk by chunk. */
  readonly onOutput?: (text: string) => void;
  /**
   * The management API the functions post to, instead of serverless-offline's own: a stand-in
   * that answers as API Gateway does (the scale bench's). @default serverless-offline's
   */
  readonly managementEndpoint?: string;
  /**
   * The Lambda API the functions (and the pollers) invoke, instead of serverless-offline's
   * own: a stand-in in front of it that refuses Invokes as Lambda does over its concurrency
   * (the scale run's). @default serverless-offline's
   */
  readonly lambdaEndpoint?: string;
  /** How long to wait for serverless-offline. @default 120 000 ms */
  readonly startupTimeoutMs?: number;
  /** How a port given as 0 is picked; for tests. @default {@link freePort} */
  readonly pickPort?: () => Promise<number>;
  /**
   * The frames FIFO queue, which makes the WebSocket API's `$default` route an SQS
   * integration as on AWS: every client frame is sent on it, in order per connection
   * (infra/local/offline/frames-hook.mjs). serverless.yml must then declare functions for
   * `$connect` and `$disconnect` only. @default none: frames go to the routes' functions
   */
  readonly frames?: OfflineFrames;
}

/** The queue the `$default` route's frames are sent on, and the SQS endpoint that has it. */
export interface OfflineFrames {
  /** The frames FIFO queue's URL. */
  readonly queueUrl: string;
  /** The local SQS (fauxqs) endpoint, e.g. `http://127.0.0.1:41234`. */
  readonly sqsEndpoint: string;
}

/**
 * The value of `LAMBDACABLE_OFFLINE_FRAMES` for serverless-offline's preload: the queue, the
 * local endpoint, region and dummy credentials, and the `$default` route's request template
 * the deploy gives API Gateway.
 */
export function offlineFramesVariable(frames: OfflineFrames): string {
  const settings: FramesSettings = {
    queueUrl: frames.queueUrl,
    endpoint: frames.sqsEndpoint,
    region: LOCAL_REGION,
    template: FRAMES_REQUEST_TEMPLATE,
    credentials: LOCAL_CREDENTIALS,
  };
  return JSON.stringify(settings);
}

/**
 * Preloaded into serverless-offline. It runs in its own process group, so that a Ctrl-C in
 * the terminal reaches only `npm start`, which stops it in order; but then nothing stops it
 * when this process is killed outright (SIGKILL). The end of its stdin, a pipe from this
 * process, says so: it then stops its group (itself and its esbuild services) with SIGTERM.
 */
const HALT_WITH_PARENT = `data:text/javascript,${encodeURIComponent(
  [
    "import { isMainThread } from 'node:worker_threads';",
    'if (isMainThread) process.stdin',
    "  .on('close', () => process.kill(-process.pid, 'SIGTERM'))",
    "  .on('error', () => {})",
    '  .resume()',
    '  .unref();',
  ].join('\n'),
)}`;

/** How serverless-offline runs the functions: in process, or in worker threads of their own. */
const OFFLINE_PRELOAD = pathToFileURL(join(here, 'preload.mjs')).href;

/**
 * The functions run in worker threads (infra/local/offline/preload.mjs): the ones `npm start`'s
 * pollers and pinger loop invoke, one or two at a time, whose SDK calls would otherwise share
 * serverless-offline's one thread with the requests they make (a fan-out's posts).
 */
const WORKER_FUNCTIONS = [
  'outboxRelay',
  'pinger',
  ...consumerGroupsFor({ LAMBDACABLE_EXAMPLE_CONSUMER: 'true' }).map((g) => g.name),
].map((fn) => `${LOCAL_PREFIX}-${fn}`);

/** How often serverless-offline is started on newly picked ports when one was taken. */
const PORT_ATTEMPTS = 4;

/**
 * Starts serverless-offline on the wanted ports, each 0 picked free. A picked port another
 * process took before serverless-offline listened on it is picked again; a given one that is
 * in use fails with {@link PortInUseError}, naming the variable that sets it.
 */
export async function startOfflineOn(
  wanted: OfflinePorts,
  base: Readonly<Record<string, string>>,
  options: OfflineOptions,
): Promise<{ offline: ChildProcess; env: Record<string, string>; ports: OfflinePorts }> {
  const pick = options.pickPort ?? freePort;
  for (let attempt = 1; ; attempt++) {
    const ports: OfflinePorts = {
      ws: wanted.ws || (await pick()),
      http: wanted.http || (await pick()),
      lambda: wanted.lambda || (await pick()),
    };
    const env: Record<string, string> = {
      ...base,
      LAMBDACABLE_MANAGEMENT_ENDPOINT:
        options.managementEndpoint ?? `http://${LOCAL_HOST}:${ports.ws}`,
      LAMBDACABLE_LAMBDA_ENDPOINT: options.lambdaEndpoint ?? `http://${LOCAL_HOST}:${ports.lambda}`,
      LAMBDACABLE_WS_PORT: String(ports.ws),
      LAMBDACABLE_HTTP_PORT: String(ports.http),
      LAMBDACABLE_LAMBDA_PORT: String(ports.lambda),
    };
    try {
      return { offline: await startOffline(env, options, ports), env, ports };
    } catch (error) {
      if (!(error instanceof PortInUseError)) throw error;
      const which = (Object.keys(ports) as (keyof OfflinePorts)[]).find(
        (k) => ports[k] === error.port,
      );
      if (which && wanted[which] !== 0) {
        throw new PortInUseError(
          error.port,
          `port ${error.port} (${PORT_VARIABLES[which]}) is in use on ${LOCAL_HOST}: stop what ` +
            `listens on it, or set ${PORT_VARIABLES[which]} to another port (0 picks a free one)`,
        );
      }
      if (attempt >= PORT_ATTEMPTS) throw error;
    }
  }
}

/**
 * A process of the local stack failed to start (serverless-offline exited, or never answered);
 * the message carries what it said.
 */
export class LocalStackError extends LambdacableError {
  /** The process, e.g. `serverless-offline`. */
  readonly service: string;
  /** Its exit code or the signal that ended it; undefined when it did not exit. */
  readonly exitStatus: number | string | undefined;
  constructor(message: string, fields: { service: string; exitStatus?: number | string }) {
    super(message);
    this.name = 'LocalStackError';
    this.service = fields.service;
    this.exitStatus = fields.exitStatus;
  }
}

/**
 * The error for a serverless-offline that exited while starting, from its exit status and its
 * output. Its preload's refusal to hook an unsupported serverless-offline
 * (infra/local/offline/hook-check.mjs) is the message itself, without the rest of the output.
 */
export function offlineExitError(exitStatus: number | string, output: string): LocalStackError {
  const at = output.indexOf(OFFLINE_HOOK_ERROR);
  const message =
    at >= 0
      ? `serverless offline did not start: ${output.slice(at).split('\n')[0]}`
      : `serverless offline exited (${exitStatus}):\n${output}`;
  return new LocalStackError(message, { service: 'serverless-offline', exitStatus });
}

/**
 * serverless-offline's report of a port it could not listen on: an error, which no port can
 * tell, so it is read from its output (it then exits).
 */
const ADDRESS_IN_USE = /EADDRINUSE: address already in use [^\s:]+:(\d+)/;
/** How long the output of an exited serverless-offline is waited for (its pipes to close). */
const EXIT_OUTPUT_MS = 2_000;

async function startOffline(
  env: Record<string, string>,
  options: OfflineOptions,
  ports: OfflinePorts,
): Promise<ChildProcess> {
  const detached = process.platform !== 'win32';
  const child = spawn(
    process.execPath,
    [
      ...(detached ? ['--import', HALT_WITH_PARENT] : []),
      // A folder for a CPU profile of serverless-offline's thread, written when it stops.
      ...(process.env.LAMBDACABLE_OFFLINE_CPU_PROF
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env.LAMBDACABLE_OFFLINE_CPU_PROF}`]
        : []),
      '--import',
      OFFLINE_PRELOAD,
      join(root, 'node_modules', 'serverless', 'bin', 'serverless.js'),
      'offline',
      'start',
      '--stage',
      LOCAL_STAGE,
      '--useInProcess',
    ],
    {
      cwd: root,
      env: {
        ...process.env,
        ...env,
        LAMBDACABLE_OFFLINE_WORKERS: WORKER_FUNCTIONS.join(','),
        ...(options.frames ? { [FRAMES_VARIABLE]: offlineFramesVariable(options.frames) } : {}),
        SLS_TELEMETRY_DISABLED: '1',
        SLS_NOTIFICATIONS_MODE: 'off',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached,
    },
  );
  const quiet = options.output === 'quiet';
  let output = '';
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    output = (output + text).slice(-16_000);
    options.onOutput?.(text);
    // Once told to halt, it only reports the invocations it abandons: expected, not news.
    if (!quiet && !isHalting(child)) process.stdout.write(text);
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  // 'exit' may come before the last of the output: 'close' comes after it.
  const closed = new Promise<void>((r) => child.once('close', () => r()));
  // This process exits without stopping the stack only when forced: then no grace period.
  const killOnExit = () => killTree(child, 'SIGKILL');
  process.once('exit', killOnExit);
  child.once('exit', () => process.off('exit', killOnExit));

  const timeoutMs = options.startupTimeoutMs ?? 120_000;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const exited = hasExited(child);
    if (exited) await within(closed, EXIT_OUTPUT_MS);
    const taken = ADDRESS_IN_USE.exec(output);
    if (taken) {
      await stopProcess(child);
      const port = Number(taken[1]);
      throw new PortInUseError(port, `serverless offline: port ${port} is in use:\n${output}`);
    }
    if (exited) throw offlineExitError(child.signalCode ?? child.exitCode ?? 'unknown', output);
    if (await offlineAnswers(ports)) return child;
    await new Promise((r) => setTimeout(r, 200));
  }
  killTree(child);
  throw new LocalStackError(`serverless offline was not ready within ${timeoutMs} ms:\n${output}`, {
    service: 'serverless-offline',
  });
}

/**
 * Whether serverless-offline answers on each of its ports (we picked them, so no output needs
 * reading): its WebSocket port's catch-all route refuses a plain GET with 426 Upgrade
 * Required (no other program would), the HTTP and Lambda ports answer anything.
 */
async function offlineAnswers(ports: OfflinePorts): Promise<boolean> {
  const [ws, http, lambda] = await Promise.all([
    httpStatus(ports.ws),
    httpStatus(ports.http),
    httpStatus(ports.lambda),
  ]);
  return ws === 426 && http !== undefined && lambda !== undefined;
}

/** The status of a GET / on a port of 127.0.0.1, on a connection of its own; undefined if none. */
function httpStatus(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request({ host: LOCAL_HOST, port, path: '/', agent: false, timeout: 1_000 });
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(undefined));
    req.end();
  });
}
