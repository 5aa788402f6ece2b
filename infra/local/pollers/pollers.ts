/**
 * The local stand-ins of what AWS invokes the functions with: the outbox stream's event
 * source mapping (a `StreamPoller` that invokes the relay), each consumer group's SQS event
 * source mapping (an `SqsPoller`), and the pinger's schedule (a loop of runs).
 */

import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { recordAwsCalls } from '../../../lib/adapters/aws/call-log';
import { LambdacableError } from '../../../lib/core';
import type { ConsumerGroupDefinition } from '../../deploy/consumers';
import { FRAMES_BATCH_SIZE } from '../../deploy/websocket/frames';
import { LOCAL_PREFIX } from '../environment';
import type { LocalAlarms } from '../local-alarms';
import { sendToRelayFailures } from '../relay-failures';
import type { LocalQueue, LocalResources } from '../resources';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../services';
import { type PollerInvocation, SqsPoller } from './sqs';
import { StreamPoller } from './stream';

/**
 * Pause between polls of the idle outbox stream: the most a commit waits for the relay
 * (the stream plugin polled every 250 ms). Idle, polling costs this process and DynamoDB
 * Local about 6% and 5% of a core at 100 ms, 9% and 7% at 50 ms, 3% and 3% at 250 ms.
 */
const STREAM_IDLE_MS = 100;
/** serverless.yml's `maximumRetryAttempts` of the outbox stream. */
const RELAY_MAX_RETRY_ATTEMPTS = 100;
const PINGER_RETRY_MS = 1_000;
/**
 * Receive loops on the client frames queue: Lambda's FIFO event source mapping takes batches
 * of different message groups (connections) at the same time, and so do these. The queue
 * keeps a group whose messages are in flight from every other receive, so one connection's
 * frames still run one after another.
 */
const FRAMES_POLLERS = 8;

/** What {@link startPollers} drives and reports to. */
export interface PollersOptions {
  /** serverless-offline's Lambda endpoint: what the pollers invoke. */
  readonly lambda: LambdaClient;
  readonly sqs: SQSClient;
  readonly dynamodbEndpoint: string;
  readonly sqsEndpoint: string;
  readonly resources: LocalResources;
  readonly groups: readonly ConsumerGroupDefinition[];
  /** Told each stream batch's age (the relay's `IteratorAge`). */
  readonly alarms: Pick<LocalAlarms, 'iteratorAge'>;
  readonly logger: Pick<Console, 'error' | 'info'>;
  /** Called after every invocation the pollers make. @default none */
  readonly onInvocation?: (invocation: PollerInvocation) => void;
  /** Where the pollers' own AWS calls are recorded. @default off */
  readonly pollerCallLog?: string;
}

/**
 * Starts the stream poller, an SQS poller per consumer group with a handler, the client
 * frames queue's pollers (`wsDefault`), and the pinger loop; hands each one's stop (which waits for its in-flight invocation) to `drain` as soon
 * as it runs.
 */
export function startPollers(
  options: PollersOptions,
  drain: (stop: () => Promise<void>) => void,
): void {
  const { lambda, sqs, resources, groups, alarms, logger } = options;
  const { dynamodbEndpoint, sqsEndpoint } = options;
  const clientConfig = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
  if (!resources.outboxStreamArn) throw new Error('the outbox table has no stream');
  const streamArn = resources.outboxStreamArn;
  const relayFunction = `${LOCAL_PREFIX}-outboxRelay`;
  const mapping = (fn: string) => `${fn} event source mapping`;
  const streams = recordAwsCalls(
    new DynamoDBStreamsClient({ ...clientConfig, endpoint: dynamodbEndpoint }),
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
  drain(() => streamPoller.stop());
  /** An SQS poller that invokes `key`'s function with batches of `queue`, as its mapping does. */
  const sqsPoller = (key: string, queue: LocalQueue, batchSize?: number) => {
    const functionName = `${LOCAL_PREFIX}-${key}`;
    const poller = new SqsPoller({
      sqs: options.pollerCallLog
        ? recordAwsCalls(
            new SQSClient({ ...clientConfig, endpoint: sqsEndpoint }),
            options.pollerCallLog,
            mapping(functionName),
          )
        : sqs,
      lambda,
      queueUrl: queue.url,
      queueArn: queue.arn,
      functionName,
      ...(batchSize ? { batchSize } : {}),
      logger,
      ...(options.onInvocation ? { onInvocation: options.onInvocation } : {}),
    });
    poller.start();
    drain(() => poller.stop());
  };
  for (const group of groups.filter((g) => g.handler)) {
    sqsPoller(group.name, resources.queues[group.name]!);
  }
  const { frames } = resources;
  for (let i = 0; frames && i < FRAMES_POLLERS; i++)
    sqsPoller('wsDefault', frames, FRAMES_BATCH_SIZE);
  drain(startPingerLoop(lambda, logger));
}

/**
 * The pinger's schedule, locally: one run after another from the start (the deployed
 * schedule starts a run each minute). The pinger welcomes new connections and pings them: it
 * always runs. A run lasts a minute: the returned stop cancels it rather than waiting for it.
 */
function startPingerLoop(
  lambda: LambdaClient,
  logger: Pick<Console, 'error'>,
): () => Promise<void> {
  const pinging = new AbortController();
  const loop = (async () => {
    while (!pinging.signal.aborted) {
      // One run pings for a minute, then the next run takes over (as the schedule does).
      await lambda
        .send(
          new InvokeCommand({ FunctionName: `${LOCAL_PREFIX}-pinger`, Payload: new Uint8Array() }),
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
  return async () => {
    pinging.abort();
    await loop;
  };
}

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

/** How old the oldest of a stream batch's records is, in ms (Lambda's `IteratorAge`). */
function iteratorAgeOf(records: readonly DynamoDBRecord[]): number {
  let oldest = Number.POSITIVE_INFINITY;
  for (const r of records) {
    const at = r.dynamodb?.ApproximateCreationDateTime;
    if (at !== undefined) oldest = Math.min(oldest, at * 1000);
  }
  return Number.isFinite(oldest) ? Math.max(0, Date.now() - oldest) : 0;
}
