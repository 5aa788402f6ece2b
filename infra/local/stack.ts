import { type ChildProcess, spawn } from 'node:child_process';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { recordAwsCalls } from '../../lib/adapters/aws/call-log';
import { LambdacableError } from '../../lib/core';
import {
  dlqUrlVariable,
  queueUrlVariable,
  RELAY_FAILURES_URL_VARIABLE,
  tableVariable,
} from '../deploy/cloudformation';
import {
  consumerGroupsFor,
  queueNames,
  relayFailuresQueueName,
  type TableName,
} from '../deploy/definitions';
import { alarmIds, monitoringSettings, RELAY_FAILURES_ALARM } from '../deploy/monitoring';
import { LocalAlarms } from './local-alarms';
import { OFFLINE_HOOK_ERROR, packageProblem } from './offline/hook-check.mjs';
import { sendToRelayFailures } from './relay-failures';
import { createLocalResources, type LocalResources } from './resources';
import {
  freePort,
  LOCAL_CREDENTIALS,
  LOCAL_HOST,
  LOCAL_REGION,
  type LocalService,
  startDynamoDBLocal,
  startSqsLocal,
} from './services';
import { type PollerInvocation, SqsPoller } from './sqs-poller';
import { StreamPoller } from './stream-poller';

/** The stage `npm start` runs; physical names are `lambdacable-local-*`. */
export const LOCAL_STAGE = 'local';
const SERVICE = 'lambdacable';
const PREFIX = `${SERVICE}-${LOCAL_STAGE}`;

/**
 * Options of {@link startLocalStack}; ports default to the documented ones, and a port of 0
 * means any free one (picked again should another process take it before it is listened on).
 */
export interface LocalStackOptions {
  /**
   * Whether the example consumer group `audit` runs (`LAMBDACABLE_EXAMPLE_CONSUMER`):
   * `npm start` runs it; tests that do not ask for it skip its queue and invocations.
   * @default false
   */
  readonly exampleConsumer?: boolean;
  /** WebSocket port. @default LAMBDACABLE_WS_PORT or 3001 */
  readonly wsPort?: number;
  /** HTTP port (broadcast API). @default LAMBDACABLE_HTTP_PORT or 3000 */
  readonly httpPort?: number;
  /** serverless-offline's Lambda invoke port. @default LAMBDACABLE_LAMBDA_PORT or 3002 */
  readonly lambdaPort?: number;
  /** DynamoDB Local's port. @default LAMBDACABLE_DYNAMODB_PORT or 8000 */
  readonly dynamodbPort?: number;
  /** fauxqs' port. @default LAMBDACABLE_SQS_PORT or 9324 */
  readonly sqsPort?: number;
  /** Extra environment for the functions (secrets, switches). */
  readonly env?: Readonly<Record<string, string>>;
  /** Where serverless-offline's output goes. @default inherited (printed) */
  readonly output?: 'inherit' | 'quiet';
  /** Also hands serverless-offline's output (the functions' logs) here, chunk by chunk. */
  readonly onOutput?: (text: string) => void;
  /**
   * Also hands each live alarm line here (`lambdacable ALARM …` / `lambdacable OK …`): a
   * message in a DLQ or the relay-failures queue, the relay falling behind, undelivered frames.
   */
  readonly onAlarm?: (line: string) => void;
  /**
   * The management API the functions post to, instead of serverless-offline's own: a stand-in
   * that answers as API Gateway does (the scale bench's). @default serverless-offline's
   */
  readonly managementEndpoint?: string;
  /**
   * Rebuilds and reloads the functions when a source file changes (off in tests, so an
   * edit during a run cannot restart a function under test). @default true
   */
  readonly watch?: boolean;
  /** How long to wait for serverless-offline. @default 120 000 ms */
  readonly startupTimeoutMs?: number;
  /**
   * Called after every invocation the stream and SQS pollers make (each one a billed Lambda
   * request where the event source mapping makes it); for benchmarks. @default none
   */
  readonly onInvocation?: (invocation: PollerInvocation) => void;
  /**
   * A file where the pollers' own AWS calls are recorded as `LAMBDACABLE_AWS_CALL_LOG`
   * records the functions' (the SQS requests of an SQS event source mapping are billed),
   * the caller named `<function> event source mapping`; for benchmarks. @default off
   */
  readonly pollerCallLog?: string;
  /** How a port given as 0 is picked; for tests. @default {@link freePort} */
  readonly pickPort?: () => Promise<number>;
}

/** A running local stack. */
export interface LocalStack {
  readonly wsUrl: string;
  readonly httpUrl: string;
  readonly dynamodbEndpoint: string;
  readonly sqsEndpoint: string;
  readonly resources: LocalResources;
  /** The environment the functions run with. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * Stops the pollers and the pinger (waiting a bounded time for their in-flight invocations),
   * then serverless-offline, then the emulators. Safe to call more than once.
   */
  stop(): Promise<void>;
}

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');

/**
 * Starts the whole system on 127.0.0.1: DynamoDB Local and fauxqs, the tables and queues,
 * serverless-offline (WebSocket API, HTTP broadcast route, the functions), a stream poller
 * that drives the outbox relay and an SQS poller for the SQS-triggered functions.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  // The pollers and the pinger stop first: their in-flight invocations need serverless-offline.
  // Then the processes, newest first: serverless-offline, then the emulators it talks to.
  const drains: (() => Promise<void>)[] = [];
  const stops: (() => Promise<void>)[] = [];
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await within(Promise.allSettled(drains.map((drain) => drain())), DRAIN_TIMEOUT_MS);
      for (const s of stops.reverse()) await s().catch(() => {});
    })();
    return stopping;
  };
  // Once stopping, in-flight work fails because serverless-offline goes away: expected, not news.
  const logger: Pick<Console, 'error' | 'info'> = {
    info: (...args: unknown[]) => console.info(...args),
    error: (...args: unknown[]) => {
      if (!stopping) console.error(...args);
    },
  };
  try {
    const port = (value: number | undefined, name: string, fallback: number): number => {
      const chosen = value ?? (process.env[name] ? Number(process.env[name]) : fallback);
      if (!Number.isInteger(chosen) || chosen < 0 || chosen > 65_535) {
        throw new LambdacableError(
          `${name}: ${value ?? process.env[name]} is not a port (0 to 65535; 0 picks a free one)`,
        );
      }
      return chosen;
    };
    // The preload checks again inside serverless-offline; checked here first, nothing starts.
    const hookProblem = packageProblem(join(root, 'node_modules', 'serverless-offline'));
    if (hookProblem) throw new LocalStackError(hookProblem, { service: 'serverless-offline' });
    const wanted: OfflinePorts = {
      ws: port(options.wsPort, 'LAMBDACABLE_WS_PORT', 3001),
      http: port(options.httpPort, 'LAMBDACABLE_HTTP_PORT', 3000),
      lambda: port(options.lambdaPort, 'LAMBDACABLE_LAMBDA_PORT', 3002),
    };
    // Every port is read before anything starts, so a bad one leaves nothing running.
    const dynamodbPort = port(options.dynamodbPort, 'LAMBDACABLE_DYNAMODB_PORT', 8000);
    const sqsPort = port(options.sqsPort, 'LAMBDACABLE_SQS_PORT', 9324);

    // Each is stopped with the stack as soon as it runs: the other may yet fail to start.
    const started = (service: LocalService) => {
      stops.push(() => service.stop());
      return service;
    };
    const [dynamodbService, sqsService] = await Promise.all([
      startDynamoDBLocal({ port: dynamodbPort }).then(started),
      startSqsLocal({ port: sqsPort }).then(started),
    ]);

    const clientConfig = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
    const dynamodb = new DynamoDBClient({ ...clientConfig, endpoint: dynamodbService.endpoint });
    const sqs = new SQSClient({ ...clientConfig, endpoint: sqsService.endpoint });
    const example = options.exampleConsumer ?? false;
    const groups = consumerGroupsFor({ LAMBDACABLE_EXAMPLE_CONSUMER: String(example) });
    const resources = await createLocalResources({
      dynamodb,
      sqs,
      prefix: PREFIX,
      consumerGroups: groups,
    });

    const base: Record<string, string> = {
      AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
      AWS_REGION: LOCAL_REGION,
      AWS_DEFAULT_REGION: LOCAL_REGION,
      LAMBDACABLE_DYNAMODB_ENDPOINT: dynamodbService.endpoint,
      LAMBDACABLE_SQS_ENDPOINT: sqsService.endpoint,
      LAMBDACABLE_SCHEDULE_PINGER: 'false',
      // serverless.cjs and the functions declare the same consumer groups as the pollers here.
      LAMBDACABLE_EXAMPLE_CONSUMER: String(example),
      // Its own build folder (a deploy never ships a local build) with source maps.
      LAMBDACABLE_BUILD_DIR: process.env.LAMBDACABLE_BUILD_DIR || '.esbuild-local',
      LAMBDACABLE_SOURCEMAPS: 'true',
      ...(options.watch === false ? { LAMBDACABLE_WATCH: 'off' } : {}),
      ...options.env,
    };
    for (const table of Object.keys(resources.tables) as TableName[]) {
      base[tableVariable(table)] = resources.tables[table];
    }
    for (const group of groups) {
      const queue = resources.queues[group.name];
      if (queue) base[queueUrlVariable(group.name)] = queue.url;
      if (queue) base[dlqUrlVariable(group.name)] = queue.dlqUrl;
    }
    if (resources.relayFailuresUrl) base[RELAY_FAILURES_URL_VARIABLE] = resources.relayFailuresUrl;

    // The deployed alarms' local equivalents, one live line each (docs/operations.md).
    const alarms = new LocalAlarms({
      sqs,
      queues: [
        ...groups.flatMap((g) => {
          const queue = resources.queues[g.name];
          return queue
            ? [
                {
                  alarm: alarmIds(g.name).deadLetters,
                  name: queueNames(PREFIX, g.name).dlq,
                  url: queue.dlqUrl,
                },
              ]
            : [];
        }),
        ...(resources.relayFailuresUrl
          ? [
              {
                alarm: RELAY_FAILURES_ALARM,
                name: relayFailuresQueueName(PREFIX),
                url: resources.relayFailuresUrl,
              },
            ]
          : []),
      ],
      settings: monitoringSettings({ ...process.env, ...options.env }),
      print: (line) => {
        if (options.output !== 'quiet') console.log(line);
        options.onAlarm?.(line);
      },
    });
    alarms.start();
    drains.push(() => alarms.stop());

    const { offline, env, ports } = await startOfflineOn(wanted, base, {
      ...options,
      onOutput: (text) => {
        alarms.output(text);
        options.onOutput?.(text);
      },
    });
    stops.push(() => stopProcess(offline));
    const { ws: wsPort, http: httpPort } = ports;

    const lambda = new LambdaClient({ ...clientConfig, endpoint: env.LAMBDACABLE_LAMBDA_ENDPOINT });
    if (!resources.outboxStreamArn) throw new Error('the outbox table has no stream');
    const streamArn = resources.outboxStreamArn;
    const relayFunction = `${PREFIX}-outboxRelay`;
    const mapping = (fn: string) => `${fn} event source mapping`;
    const streams = recordAwsCalls(
      new DynamoDBStreamsClient({ ...clientConfig, endpoint: dynamodbService.endpoint }),
      options.pollerCallLog,
      mapping(relayFunction),
    );
    const streamPoller = new StreamPoller({
      streams,
      streamArn,
      // serverless.yml's event source mapping: batchSize 100, TRIM_HORIZON (the tables are
      // new each run, so nothing older is replayed), 100 retries, then the batch's metadata
      // goes to the relay failures queue (`npm run relay:replay` relays it again).
      batchSize: 100,
      start: 'TRIM_HORIZON',
      maxRetryAttempts: RELAY_MAX_RETRY_ATTEMPTS,
      ...(resources.relayFailuresUrl
        ? {
            onFailure: sendToRelayFailures({
              sqs,
              queueUrl: resources.relayFailuresUrl,
              streamArn,
              functionName: relayFunction,
            }),
          }
        : {}),
      idleMs: STREAM_IDLE_MS,
      handler: async (records) => {
        const invoked = performance.now();
        alarms.iteratorAge(iteratorAgeOf(records));
        let failed = true;
        try {
          const out = await invokeFunction<DynamoDBBatchResponse>(
            lambda,
            relayFunction,
            streamEventOf(records, streamArn),
          );
          failed = false;
          return out;
        } finally {
          options.onInvocation?.({
            functionName: relayFunction,
            records: records.length,
            ms: performance.now() - invoked,
            failed,
          });
        }
      },
      logger,
    });
    streamPoller.start();
    drains.push(() => streamPoller.stop());
    for (const group of groups.filter((g) => g.handler)) {
      const queue = resources.queues[group.name]!;
      const functionName = `${PREFIX}-${group.name}`;
      const poller = new SqsPoller({
        sqs: options.pollerCallLog
          ? recordAwsCalls(
              new SQSClient({ ...clientConfig, endpoint: sqsService.endpoint }),
              options.pollerCallLog,
              mapping(functionName),
            )
          : sqs,
        lambda,
        queueUrl: queue.url,
        queueArn: queue.arn,
        functionName,
        logger,
        ...(options.onInvocation ? { onInvocation: options.onInvocation } : {}),
      });
      poller.start();
      drains.push(() => poller.stop());
    }
    {
      // The pinger welcomes new connections and pings them: it always runs. A run lasts a
      // minute: stopping cancels it rather than waiting for it.
      const pinging = new AbortController();
      const loop = (async () => {
        while (!pinging.signal.aborted) {
          // One run pings for a minute, then the next run takes over (as the schedule does).
          await lambda
            .send(
              new InvokeCommand({ FunctionName: `${PREFIX}-pinger`, Payload: new Uint8Array() }),
              { abortSignal: pinging.signal },
            )
            .catch(async (error: unknown) => {
              if (pinging.signal.aborted) return;
              logger.error('pinger failed', error);
              // A pinger that fails at once must not turn this loop into a busy one.
              await new Promise((r) => setTimeout(r, PINGER_RETRY_MS));
            });
        }
      })();
      drains.push(async () => {
        pinging.abort();
        await loop;
      });
    }

    return {
      wsUrl: `ws://${LOCAL_HOST}:${wsPort}`,
      httpUrl: `http://${LOCAL_HOST}:${httpPort}`,
      dynamodbEndpoint: dynamodbService.endpoint,
      sqsEndpoint: sqsService.endpoint,
      resources,
      env,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Pause between polls of the idle outbox stream: the most a commit waits for the relay
 * (the stream plugin polled every 250 ms). Idle, polling costs this process and DynamoDB
 * Local about 6% and 5% of a core at 100 ms, 9% and 7% at 50 ms, 3% and 3% at 250 ms.
 */
const STREAM_IDLE_MS = 100;
/** serverless.yml's `maximumRetryAttempts` of the outbox stream. */
const RELAY_MAX_RETRY_ATTEMPTS = 100;
/** How long stopping waits for in-flight invocations of the pollers before it goes on. */
const DRAIN_TIMEOUT_MS = 5_000;
/** How long serverless-offline has to halt after SIGTERM before it gets SIGKILL. */
const HALT_TIMEOUT_MS = 5_000;
const PINGER_RETRY_MS = 1_000;

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

/**
 * The event Lambda's DynamoDB Stream event source mapping hands the function: the records
 * of one GetRecords with their stream's ARN and region.
 */
export function streamEventOf(
  records: readonly DynamoDBRecord[],
  streamArn: string,
): DynamoDBStreamEvent {
  return {
    Records: records.map((r) => ({
      ...r,
      eventSource: 'aws:dynamodb',
      eventSourceARN: streamArn,
      awsRegion: r.awsRegion ?? LOCAL_REGION,
    })),
  };
}

/**
 * Invokes a function synchronously through serverless-offline's Lambda endpoint and returns
 * what it returned; a function error is thrown, so a poller retries the batch. Binary
 * attributes travel as base64, as in the events Lambda builds.
 */
async function invokeFunction<T>(
  lambda: LambdaClient,
  functionName: string,
  event: unknown,
): Promise<T> {
  const payload = JSON.stringify(event, function base64(this: Record<string, unknown>, key, value) {
    const raw = this[key];
    return raw instanceof Uint8Array ? Buffer.from(raw).toString('base64') : value;
  });
  const out = await lambda.send(
    new InvokeCommand({ FunctionName: functionName, Payload: new TextEncoder().encode(payload) }),
  );
  const text = out.Payload ? new TextDecoder().decode(out.Payload) : '';
  if (out.FunctionError) throw new FunctionInvocationError(functionName, out.FunctionError, text);
  return (text ? JSON.parse(text) : {}) as T;
}

/** A function invoked through serverless-offline failed (it threw, or timed out). */
export class FunctionInvocationError extends LambdacableError {
  readonly functionName: string;
  readonly functionError: string;
  constructor(functionName: string, functionError: string, payload: string) {
    super(`${functionName} failed (${functionError}): ${payload}`);
    this.name = 'FunctionInvocationError';
    this.functionName = functionName;
    this.functionError = functionError;
  }
}

/** How serverless-offline runs the functions: in process, or in worker threads of their own. */
const OFFLINE_PRELOAD = pathToFileURL(join(here, 'offline', 'preload.mjs')).href;

/**
 * The functions run in worker threads (infra/local/offline/preload.mjs): the ones `npm start`'s
 * pollers and pinger loop invoke, one or two at a time, whose SDK calls would otherwise share
 * serverless-offline's one thread with the requests they make (a fan-out's posts).
 */
const WORKER_FUNCTIONS = [
  'outboxRelay',
  'pinger',
  ...consumerGroupsFor({ LAMBDACABLE_EXAMPLE_CONSUMER: 'true' }).map((g) => g.name),
].map((fn) => `${PREFIX}-${fn}`);

/**
 * Any free port for every service, for tests and benchmarks that must not clash with
 * `npm start` or with each other: the emulators listen on one the OS picks, serverless-offline
 * on ones picked for it (again, should another process take one first).
 */
export function freeStackPorts(): Required<
  Pick<LocalStackOptions, 'wsPort' | 'httpPort' | 'lambdaPort' | 'dynamodbPort' | 'sqsPort'>
> {
  return { wsPort: 0, httpPort: 0, lambdaPort: 0, dynamodbPort: 0, sqsPort: 0 };
}

interface OfflinePorts {
  readonly ws: number;
  readonly http: number;
  readonly lambda: number;
}

const PORT_VARIABLES: Readonly<Record<keyof OfflinePorts, string>> = {
  ws: 'LAMBDACABLE_WS_PORT',
  http: 'LAMBDACABLE_HTTP_PORT',
  lambda: 'LAMBDACABLE_LAMBDA_PORT',
};

/** How often serverless-offline is started on newly picked ports when one was taken. */
const PORT_ATTEMPTS = 4;

/**
 * Starts serverless-offline on the wanted ports, each 0 picked free. A picked port another
 * process took before serverless-offline listened on it is picked again; a given one that is
 * in use fails with {@link PortInUseError}, naming the variable that sets it.
 */
async function startOfflineOn(
  wanted: OfflinePorts,
  base: Readonly<Record<string, string>>,
  options: LocalStackOptions,
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
      LAMBDACABLE_LAMBDA_ENDPOINT: `http://${LOCAL_HOST}:${ports.lambda}`,
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

/** A port serverless-offline was to listen on is in use. */
export class PortInUseError extends LambdacableError {
  readonly port: number;
  constructor(port: number, message: string) {
    super(message);
    this.name = 'PortInUseError';
    this.port = port;
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
  options: LocalStackOptions,
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
    if (!quiet && !halting.has(child)) process.stdout.write(text);
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

function killTree(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): void {
  if (hasExited(child) || child.pid === undefined) return;
  try {
    if (process.platform !== 'win32') process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {
    // already gone
  }
}

/** serverless-offline processes told to halt. */
const halting = new WeakSet<ChildProcess>();

async function stopProcess(child: ChildProcess): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  halting.add(child);
  killTree(child, 'SIGTERM');
  const timer = setTimeout(() => {
    console.error(`serverless offline did not halt within ${HALT_TIMEOUT_MS} ms; killing it`);
    killTree(child, 'SIGKILL');
  }, HALT_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Resolves when `promise` settles or `ms` have passed, whichever is first. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** How old the oldest of a stream batch's records is, in ms (Lambda's `IteratorAge`). */
function iteratorAgeOf(records: readonly DynamoDBRecord[]): number {
  let oldest = Number.POSITIVE_INFINITY;
  for (const r of records) {
    const at = r.dynamodb?.ApproximateCreationDateTime;
    if (at !== undefined) oldest = Math.min(oldest, at * 1000);
  }
  return Number.isFinite(oldest) ? Math.max(0, Date.now() - oldest) : 0;
}
