import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import { consumerGroupsFor } from '../deploy/consumers';
import { monitoringSettings } from '../deploy/monitoring/settings';
import {
  alarmIds,
  FRAMES,
  framesQueueNames,
  queueNames,
  RELAY_FAILURES_ALARM,
  relayFailuresQueueName,
} from '../deploy/names';
import { functionsEnvironment, LOCAL_PREFIX } from './environment';
import { LocalAlarms } from './local-alarms';
import { packageProblem } from './offline/hook-check.mjs';
import { LocalStackError, type OfflineOptions, startOfflineOn } from './offline/launch';
import { startPollers } from './pollers/pollers';
import type { PollerInvocation } from './pollers/sqs';
import { type StackPortOptions, stackPorts } from './ports';
import { stopProcess, within } from './processes';
import { createLocalResources, type LocalResources } from './resources';
import {
  LOCAL_CREDENTIALS,
  LOCAL_HOST,
  LOCAL_REGION,
  type LocalService,
  startDynamoDBLocal,
  startSqsLocal,
} from './services';

// The stack's parts, from here as before: its stage, its ports, serverless-offline's errors,
// and the events and errors of the pollers' invocations.
export { LOCAL_STAGE } from './environment';
export { LocalStackError, offlineExitError } from './offline/launch';
export { FunctionInvocationError, streamEventOf } from './pollers/pollers';
export { freeStackPorts, PortInUseError } from './ports';

/**
 * Options of {@link startLocalStack}; ports default to the documented ones, and a port of 0
 * means any free one (picked again should another process take it before it is listened on).
 */
export interface LocalStackOptions extends StackPortOptions, OfflineOptions {
  /**
   * Whether the example consumer group `audit` runs (`LAMBDACABLE_EXAMPLE_CONSUMER`):
   * `npm start` runs it; tests that do not ask for it skip its queue and invocations.
   * @default false
   */
  readonly exampleConsumer?: boolean;
  /** Extra environment for the functions (secrets, switches). */
  readonly env?: Readonly<Record<string, string>>;
  /** Also hands serverless-offline's output (the functions' logs) here, chunk by chunk. */
  readonly onOutput?: (text: string) => void;
  /**
   * Also hands each live alarm line here (`lambdacable ALARM …` / `lambdacable OK …`): a
   * message in a DLQ or the relay-failures queue, the relay falling behind, undelivered frames.
   */
  readonly onAlarm?: (line: string) => void;
  /**
   * Rebuilds and reloads the functions when a source file changes (off in tests, so an
   * edit during a run cannot restart a function under test). @default true
   */
  readonly watch?: boolean;
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

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** How long stopping waits for in-flight invocations of the pollers before it goes on. */
const DRAIN_TIMEOUT_MS = 5_000;

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
    // The preload checks again inside serverless-offline; checked here first, nothing starts.
    const hookProblem = packageProblem(join(root, 'node_modules', 'serverless-offline'));
    if (hookProblem) throw new LocalStackError(hookProblem, { service: 'serverless-offline' });
    const wanted = stackPorts(options, process.env);

    // Each is stopped with the stack as soon as it runs: the other may yet fail to start.
    const started = (service: LocalService) => {
      stops.push(() => service.stop());
      return service;
    };
    const [dynamodbService, sqsService] = await Promise.all([
      startDynamoDBLocal({ port: wanted.dynamodb }).then(started),
      startSqsLocal({ port: wanted.sqs }).then(started),
    ]);

    const clientConfig = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
    const dynamodb = new DynamoDBClient({ ...clientConfig, endpoint: dynamodbService.endpoint });
    const sqs = new SQSClient({ ...clientConfig, endpoint: sqsService.endpoint });
    const example = options.exampleConsumer ?? false;
    const groups = consumerGroupsFor({ LAMBDACABLE_EXAMPLE_CONSUMER: String(example) });
    const resources = await createLocalResources({
      dynamodb,
      sqs,
      prefix: LOCAL_PREFIX,
      consumerGroups: groups,
    });
    const base = functionsEnvironment({
      dynamodbEndpoint: dynamodbService.endpoint,
      sqsEndpoint: sqsService.endpoint,
      resources,
      groups,
      exampleConsumer: example,
      buildDir: process.env.LAMBDACABLE_BUILD_DIR,
      watch: options.watch,
      env: options.env,
    });

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
                  name: queueNames(LOCAL_PREFIX, g.name).dlq,
                  url: queue.dlqUrl,
                },
              ]
            : [];
        }),
        ...(resources.frames
          ? [
              {
                alarm: alarmIds(FRAMES).deadLetters,
                name: framesQueueNames(LOCAL_PREFIX).dlq,
                url: resources.frames.dlqUrl,
              },
            ]
          : []),
        ...(resources.relayFailuresUrl
          ? [
              {
                alarm: RELAY_FAILURES_ALARM,
                name: relayFailuresQueueName(LOCAL_PREFIX),
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

    const { offline, env, ports } = await startOfflineOn(wanted.offline, base, {
      ...options,
      ...(resources.frames
        ? { frames: { queueUrl: resources.frames.url, sqsEndpoint: sqsService.endpoint } }
        : {}),
      onOutput: (text) => {
        alarms.output(text);
        options.onOutput?.(text);
      },
    });
    stops.push(() => stopProcess(offline));
    const { ws: wsPort, http: httpPort } = ports;

    const lambda = new LambdaClient({ ...clientConfig, endpoint: env.LAMBDACABLE_LAMBDA_ENDPOINT });
    startPollers(
      {
        lambda,
        sqs,
        dynamodbEndpoint: dynamodbService.endpoint,
        sqsEndpoint: sqsService.endpoint,
        resources,
        groups,
        alarms,
        logger,
        ...(options.onInvocation ? { onInvocation: options.onInvocation } : {}),
        ...(options.pollerCallLog ? { pollerCallLog: options.pollerCallLog } : {}),
      },
      (drain) => drains.push(drain),
    );

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
