/**
 * The composition root: the one place that reads the environment and wires the library's
 * adapters for the Lambda handlers in this folder. Each part is built on first use, once
 * per Lambda instance, and is its own function so that a handler's bundle holds only the
 * parts it uses (esbuild drops the rest) and its cold start builds only those.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import {
  DELIVER_FUNCTION_VARIABLE,
  dlqUrlVariable,
  queueUrlVariable,
  RELAY_FAILURES_URL_VARIABLE,
  tableVariable,
} from '../infra/deploy/cloudformation';
import {
  consumerGroups,
  type TableName,
  tables as tableDefinitions,
} from '../infra/deploy/definitions';
import {
  ApiGatewayConnectionApi,
  type BatchConsumerOptions,
  type ConsumedMessage,
  consumeSqsBatch,
  DynamoAckStore,
  DynamoBroker,
  DynamoConnectionStore,
  DynamoOutbox,
  DynamoPingerLayoutStore,
  DynamoPresenceStore,
  DynamoRateLimiter,
  DynamoRevocationStore,
  DynamoSchemaRegistry,
  DynamoSessionCache,
  LambdaPingerInvoker,
  LambdaTaskRunner,
  OutboxProducer,
  OutboxRelay,
  recordAwsCalls,
  SqsRelayParking,
} from '../lib/aws';
import {
  AvroCodec,
  BROADCAST_TOPIC,
  BroadcastEvent,
  type Broadcaster,
  type Broker,
  ConfigError,
  cachedBuckets,
  composeDelivery,
  composeRealtime,
  configFromEnv,
  createEventSender,
  type Delivery,
  type DeliveryCounts,
  type EventSender,
  EventTopics,
  type EventType,
  type FrameLimitCounts,
  type Gateway,
  type GatewayConfig,
  LambdacableError,
  LegacyBroker,
  PingerRuns,
  PresenceEvent,
  type PresenceSettings,
  presenceEventOf,
  type Realtime,
  RemoteCommandEvent,
  type SchemaRegistry,
  type SessionCache,
} from '../lib/core';

type Env = Readonly<Record<string, string | undefined>>;

/** What every handler needs: settings, logger, clients, resource names. */
export interface Runtime {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly dynamodb: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly tables: Readonly<Record<TableName, string>>;
  /** Consumer group → queue URL. */
  readonly queues: Readonly<Record<string, string>>;
  /**
   * Consumer group → DLQ URL, where its consumer parks a message that can never be handled
   * (`LAMBDACABLE_DLQ_<GROUP>`; without it such a message is retried until `maxReceiveCount`).
   */
  readonly deadLetterQueues: Readonly<Record<string, string | undefined>>;
  /**
   * The relay failures queue, where the relay parks a record it can never send
   * (`LAMBDACABLE_RELAY_FAILURES_QUEUE`; without it such a record is retried until Lambda
   * gives its batch up).
   */
  readonly relayFailuresQueue: string | undefined;
  /** The management API endpoint of a WebSocket request. */
  managementEndpoint(context: { domainName?: string; stage?: string }): string;
  /** Applies the call recorder (`LAMBDACABLE_AWS_CALL_LOG`) to an SDK client. */
  record<C>(client: C): C;
}

/** What the WebSocket side is built over. */
interface WebSocketAdapters {
  readonly store: DynamoConnectionStore;
  readonly api: ApiGatewayConnectionApi;
  readonly sessions: DynamoSessionCache;
  readonly revocations: DynamoRevocationStore;
}

/**
 * Settings of every SDK client. `cacheMiddleware` resolves a command's middleware chain once
 * per client and command type instead of on every call: a fan-out makes a `PostToConnection`
 * per subscriber, and resolving the chain was 13–24% of each call's CPU (`npm run bench`). The
 * call recorder is added right after a client is built, before its first call, as the cache
 * requires.
 */
export const CLIENT_DEFAULTS = { cacheMiddleware: true } as const;

let base: Runtime | undefined;
const parts = new Map<string, unknown>();
/** `process.env` with the secrets read from their stores (functions/secrets.ts). */
let withSecretValues: Env | undefined;

/** Builds a part once per instance. */
function part<T>(name: string, build: (rt: Runtime) => T): T {
  if (!parts.has(name)) parts.set(name, build(runtime()));
  return parts.get(name) as T;
}

/**
 * The runtime of this Lambda instance, built from `process.env` (with the secrets read from
 * their stores, functions/secrets.ts) on first use.
 */
export function runtime(): Runtime {
  if (!base) {
    // A cheap check (secretSettings would grow every bundle): a LAMBDACABLE_*_PARAM is set.
    const named = Object.keys(process.env).some(
      (k) => k.startsWith('LAMBDACABLE_') && k.endsWith('_PARAM') && process.env[k],
    );
    if (!withSecretValues && named) {
      throw new ConfigError(
        'this function reads its secrets from their stores (LAMBDACABLE_*_PARAM): its handler awaits withSecrets() before anything else',
        { variable: 'LAMBDACABLE_*_PARAM' },
      );
    }
    base = buildRuntime(withSecretValues ?? process.env);
  }
  return base;
}

/**
 * Uses `env`, the process environment with the secrets `withSecrets` read from their stores
 * (functions/secrets.ts): when one of `variables` differs from what the runtime was built
 * with (a rotation), the runtime and its parts are built again over it.
 */
export function useSecrets(env: Env, variables: readonly string[]): void {
  const before = withSecretValues;
  if (before && variables.every((v) => env[v] === before[v])) return;
  withSecretValues = env;
  base = undefined;
  parts.clear();
}

/** Builds the base runtime from an environment; throws a clear error when a setting is missing. */
export function buildRuntime(env: Env): Runtime {
  const config = configFromEnv(env);
  const logger = new Logger({ serviceName: serviceName(env) });
  const callLog = env.LAMBDACABLE_AWS_CALL_LOG || undefined;
  const functionName = env.AWS_LAMBDA_FUNCTION_NAME ?? 'unknown';
  const record = <C>(client: C): C => recordAwsCalls(client, callLog, functionName);
  const dynamodbEndpoint = env.LAMBDACABLE_DYNAMODB_ENDPOINT || undefined;
  const sqsEndpoint = env.LAMBDACABLE_SQS_ENDPOINT || undefined;
  const managementOverride = env.LAMBDACABLE_MANAGEMENT_ENDPOINT || undefined;
  const tables = Object.fromEntries(
    (Object.keys(tableDefinitions) as TableName[]).map((t) => [t, required(env, tableVariable(t))]),
  ) as Record<TableName, string>;
  const queues = Object.fromEntries(
    consumerGroups.map((g) => [g.name, required(env, queueUrlVariable(g.name))]),
  );
  const deadLetterQueues = Object.fromEntries(
    consumerGroups.map((g) => [g.name, env[dlqUrlVariable(g.name)] || undefined]),
  );
  return {
    config,
    logger,
    dynamodb: record(
      new DynamoDBClient({
        ...CLIENT_DEFAULTS,
        ...(dynamodbEndpoint ? { endpoint: dynamodbEndpoint } : {}),
      }),
    ),
    sqs: record(
      new SQSClient({ ...CLIENT_DEFAULTS, ...(sqsEndpoint ? { endpoint: sqsEndpoint } : {}) }),
    ),
    tables,
    queues,
    deadLetterQueues,
    relayFailuresQueue: env[RELAY_FAILURES_URL_VARIABLE] || undefined,
    managementEndpoint: (context) =>
      managementOverride ?? `https://${context.domainName}/${context.stage}`,
    record,
  };
}

/** CloudWatch metrics in embedded metric format; handlers publish what they add. */
export function metrics(): Metrics {
  return part(
    'metrics',
    () =>
      new Metrics({
        serviceName: serviceName(process.env),
        namespace: process.env.POWERTOOLS_METRICS_NAMESPACE || 'lambdacable',
      }),
  );
}

/** The pinger's layout and run reports, in the connections table. */
function pingerLayouts(): DynamoPingerLayoutStore {
  return part(
    'pingerLayouts',
    ({ dynamodb, tables }) =>
      new DynamoPingerLayoutStore({ client: dynamodb, tableName: tables.connections }),
  );
}

/**
 * The fan-out's frame counts as metrics (`broadcast` and `deliver` publish them): every frame
 * given up on is counted in `undeliveredFrames` and logged with its connection and stream.
 */
export function addFrameMetrics(m: Metrics, frames: DeliveryCounts): void {
  m.addMetric('deliveredFrames', MetricUnit.Count, frames.delivered);
  m.addMetric('undeliveredFrames', MetricUnit.Count, frames.undelivered);
  m.addMetric('retriedPosts', MetricUnit.Count, frames.retried);
  m.addMetric('redeliveredFrames', MetricUnit.Count, frames.redelivered);
  m.addMetric('goneConnections', MetricUnit.Count, frames.gone);
}

/**
 * The rate limit's refusals as metrics (`wsDefault` publishes them when there are any):
 * `rateLimitedFrames` (subscribes and history rejected, whispers and messages dropped) and
 * `floodDisconnects` (connections disconnected with `too_many_requests`).
 */
export function addFrameLimitMetrics(m: Metrics, counts: FrameLimitCounts): void {
  m.addMetric('rateLimitedFrames', MetricUnit.Count, counts.rateLimitedFrames);
  m.addMetric('floodDisconnects', MetricUnit.Count, counts.floodDisconnects);
}

/** The connections table, the management API and the session cache, built once per instance. */
function adapters(): WebSocketAdapters {
  return part('adapters', ({ dynamodb, tables, config, logger, record }) => {
    const override = process.env.LAMBDACABLE_MANAGEMENT_ENDPOINT || undefined;
    return {
      store: new DynamoConnectionStore({
        client: dynamodb,
        tableName: tables.connections,
        // B of the pinger layout, read at most once a minute per instance.
        buckets: cachedBuckets(pingerLayouts(), { logger }),
      }),
      api: new ApiGatewayConnectionApi({
        ...(override ? { endpoint: override } : {}),
        // One management client per endpoint, each with the call recorder.
        createClient: (endpoint) =>
          // The adapter retries throttles and 5xx itself, then the fan-out in later passes.
          record(
            new ApiGatewayManagementApiClient({ ...CLIENT_DEFAULTS, endpoint, maxAttempts: 1 }),
          ),
      }),
      sessions: new DynamoSessionCache({
        client: dynamodb,
        tableName: tables.sessions,
        config: config.broker,
      }),
      revocations: new DynamoRevocationStore({
        client: dynamodb,
        tableName: tables.sessions,
        config: config.broker,
      }),
    };
  });
}

/** The Lambda client (`LAMBDACABLE_LAMBDA_ENDPOINT` points it at serverless-offline locally). */
function lambda(): LambdaClient {
  return part('lambda', ({ record }) => {
    const endpoint = process.env.LAMBDACABLE_LAMBDA_ENDPOINT || undefined;
    return record(new LambdaClient({ ...CLIENT_DEFAULTS, ...(endpoint ? { endpoint } : {}) }));
  });
}

/**
 * The pinger's partitions: the coordinator (the scheduled run) starts the other partitions'
 * runs with an asynchronous invoke of this function (`LAMBDACABLE_LAMBDA_ENDPOINT` points
 * it at serverless-offline locally).
 */
export function pingerRuns(): PingerRuns {
  return part('pingerRuns', ({ config, logger }) => {
    const functionName = process.env.AWS_LAMBDA_FUNCTION_NAME;
    if (!functionName) {
      throw new ConfigError('AWS_LAMBDA_FUNCTION_NAME is not set: Lambda sets it', {
        variable: 'AWS_LAMBDA_FUNCTION_NAME',
      });
    }
    return new PingerRuns({
      layouts: pingerLayouts(),
      invoker: new LambdaPingerInvoker({ client: lambda(), functionName }),
      partitionRate: config.pingerPartitionRate,
      logger,
    });
  });
}

/**
 * The broker over the fan-out, each built after what it uses: history on DynamoDB, or
 * AnyCable's broker-less mode when `LAMBDACABLE_BROKER=legacy`.
 */
function brokerOver(broadcaster: Broadcaster, sessions: SessionCache): Broker {
  const { dynamodb, tables, config } = runtime();
  if (config.brokerAdapter === 'legacy') return new LegacyBroker({ broadcaster });
  return new DynamoBroker({
    client: dynamodb,
    historyTable: tables.history,
    sessions,
    broadcaster,
    config: config.broker,
    streamMetaTtl: config.streamMetaTtl,
  });
}

/** The fan-out's later passes over failed posts, from the settings. */
function postRetries(config: GatewayConfig) {
  return { retryPasses: config.postRetryPasses, retryBackoffMs: config.postRetryBackoffMs };
}

/**
 * The broadcast consumer's and the `deliver` function's part: the broker and its fan-out,
 * without the gateway. An audience over `LAMBDACABLE_FANOUT_TASK_SIZE` is delivered by
 * fan-out tasks, each an invocation of `deliver`.
 */
export function delivery(): Delivery<Broker> {
  return part('delivery', ({ config, logger }) => {
    const runner = new LambdaTaskRunner({
      client: lambda(),
      functionName: required(process.env, DELIVER_FUNCTION_VARIABLE),
    });
    const tasks = {
      runner,
      taskSize: config.fanoutTaskSize,
      shardTarget: config.streamShardTarget,
      retryBudgetMs: config.fanoutRetryBudgetMs,
    };
    return composeDelivery(
      { ...adapters(), logger, ...postRetries(config), tasks, presence: presence() },
      brokerOver,
    );
  });
}

/**
 * The gateway's per-connection token buckets, in the connections table (`sk` `r` beside each
 * connection item); none when `LAMBDACABLE_RATE_LIMIT` is `0`.
 */
function rateLimiter(): DynamoRateLimiter | undefined {
  return part('rateLimiter', ({ dynamodb, tables, config }) =>
    config.rateLimit > 0
      ? new DynamoRateLimiter({
          client: dynamodb,
          tableName: tables.connections,
          limit: { rate: config.rateLimit, burst: config.rateBurst },
        })
      : undefined,
  );
}

/** The WebSocket side: fan-out, broker, gateway and pinger runs over one session cache. */
export function realtime(): Realtime<Broker> {
  return part('realtime', ({ config, logger }) =>
    composeRealtime(
      {
        ...adapters(),
        config,
        logger,
        ...postRetries(config),
        rateLimiter: rateLimiter(),
        presence: presence(),
      },
      brokerOver,
    ),
  );
}

/** The WebSocket gateway: the protocol, tokens and sessions. */
export function gateway(): Gateway {
  return realtime().gateway;
}

/**
 * Encodes and decodes events with the schema registry table, which no function writes: the
 * deploy registers the schemas they encode (`infra/deploy/schemas.ts`), so encoding looks an
 * id up (a `GetItem`) and an unregistered schema is an error, never a registration.
 */
export function codec(): AvroCodec {
  return part('codec', () => new AvroCodec(registeredSchemas()));
}

/** The schema registry table, read only: `register` looks the id of a schema up. */
function registeredSchemas(): SchemaRegistry {
  return part('registeredSchemas', ({ dynamodb, tables }) => {
    const registry = new DynamoSchemaRegistry({ client: dynamodb, tableName: tables.schemas });
    return {
      register: async (subject, schema) => {
        const id = await registry.idOf(schema);
        if (id === undefined) {
          throw new LambdacableError(
            `the schema of ${subject} is not in ${tables.schemas}: the deploy registers it (infra/deploy/schemas.ts)`,
          );
        }
        return id;
      },
      getById: (id) => registry.getById(id),
    };
  });
}

/**
 * Presence in the connections table. Its joins and leaves are `PresenceEvent`s written to the
 * outbox in the transaction of the change (an `EventSender` over the outbox), so the broadcast
 * consumer fans them out in the order they happened and services may consume them.
 */
function presence(): PresenceSettings {
  return part('presence', ({ dynamodb, tables, config, logger }) => {
    let sender: Promise<EventSender<TransactWriteItem[]>> | undefined;
    const events = () => {
      if (!sender) {
        sender = createEventSender<TransactWriteItem[]>({
          topics: new EventTopics().register(PresenceEvent),
          registry: registeredSchemas(),
          outbox: new DynamoOutbox({ tableName: tables.outbox }),
        }).initialize();
        // A failed lookup (the schema not registered yet) is tried again on the next change.
        sender.catch(() => {
          sender = undefined;
        });
      }
      return sender;
    };
    return {
      store: new DynamoPresenceStore({
        client: dynamodb,
        tableName: tables.connections,
        buckets: cachedBuckets(pingerLayouts(), { logger }),
        changes: async (changes) => {
          const tx: TransactWriteItem[] = [];
          const out = await events();
          for (const change of changes) {
            await out.sendInTx(tx, { type: PresenceEvent, value: presenceEventOf(change) });
          }
          return tx;
        },
      }),
      ttlMs: config.presenceTtl * 1000,
    };
  });
}

/** The stream relay: outbox records → the queues of the groups subscribed to their topic. */
export function relay(): OutboxRelay {
  return part('relay', ({ sqs, queues, logger, relayFailuresQueue }) => {
    const routes: Record<string, string[]> = {};
    for (const group of consumerGroups) {
      for (const topic of group.topics)
        routes[topic] = [...(routes[topic] ?? []), queues[group.name]!];
    }
    return new OutboxRelay({
      sqs,
      routes,
      // A refused record (unreadable, oversize, SenderFault) is parked in relay-failures with
      // its item, and its shard goes on; relay:replay sends it again.
      onRefused: (error, sequenceNumber) =>
        logger.error('outbox record refused', { error, sequenceNumber }),
      ...(relayFailuresQueue
        ? { parking: new SqsRelayParking({ sqs, queueUrl: relayFailuresQueue }) }
        : {}),
    });
  });
}

/** `consumeSqsBatch`'s `deadLetter` option for `group`: its DLQ, when the environment names it. */
export function deadLetterOf(group: string): { deadLetter?: BatchConsumerOptions['deadLetter'] } {
  const { sqs, deadLetterQueues } = runtime();
  const url = deadLetterQueues[group];
  return url ? { deadLetter: { sqs, queueUrl: () => url } } : {};
}

/**
 * The Lambda handler of a consumer group declared in `infra/deploy/consumers.ts`: each SQS
 * record becomes a {@link ConsumedMessage} for `handle` (`consumeSqsBatch`), with the group's
 * ack state in the `acks` table when it declares `ackStore`, a transiently failed message's
 * redelivery delayed by `backoffSeconds` (2 s doubling, at most 120), a permanently failed one
 * parked in the group's DLQ at once, and the `consumedMessages`, `failedMessages` and
 * `parkedMessages` metrics.
 */
export function consumer(
  group: string,
  handle: (message: ConsumedMessage) => Promise<void>,
): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return async (event) => {
    const { logger, sqs, queues, dynamodb, tables } = runtime();
    const definition = consumerGroups.find((g) => g.name === group);
    if (!definition) {
      throw new ConfigError(`no consumer group named ${group} in infra/deploy/consumers.ts`, {
        variable: 'consumerGroups',
      });
    }
    const response = await consumeSqsBatch(event, handle, {
      group,
      ...(definition.ackStore
        ? {
            ackStore: new DynamoAckStore({
              client: dynamodb,
              tableName: tables.acks,
              ttlSeconds: runtime().config.ackTtl,
            }),
          }
        : {}),
      logger,
      visibility: { sqs, queueUrl: () => queues[group]! },
      ...deadLetterOf(group),
    });
    const m = metrics();
    const failed = response.batchItemFailures.length;
    m.addMetric(
      'consumedMessages',
      MetricUnit.Count,
      event.Records.length - failed - response.parked,
    );
    m.addMetric('failedMessages', MetricUnit.Count, failed);
    m.addMetric('parkedMessages', MetricUnit.Count, response.parked);
    m.publishStoredMetrics();
    return response;
  };
}

/**
 * Writes broadcasts to the outbox (the log), never to SQS directly; refuses, before the
 * write, a broadcast or command that could not reach a subscriber (SQS body, frame limit).
 */
export function producer(): OutboxProducer {
  return part(
    'producer',
    ({ dynamodb, tables }) =>
      new OutboxProducer({
        client: dynamodb,
        tableName: tables.outbox,
        topic: BROADCAST_TOPIC,
        eventTypes: [BroadcastEvent, RemoteCommandEvent] as EventType<unknown>[],
      }),
  );
}

function serviceName(env: Env): string {
  return env.POWERTOOLS_SERVICE_NAME || 'lambdacable';
}

function required(env: Env, name: string): string {
  const value = env[name];
  if (!value) {
    throw new ConfigError(`${name} is not set: serverless.yml or npm start sets it`, {
      variable: name,
    });
  }
  return value;
}
