/**
 * The real-time parts of the composition root: the WebSocket adapters, the broker over the
 * fan-out, the gateway, the fan-out tasks, presence and the pinger's partitions. Each is
 * built on first use, once per Lambda instance.
 */

import type { TransactWriteItem } from '@aws-sdk/client-dynamodb';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { DELIVER_FUNCTION_VARIABLE } from '../../infra/deploy/names';
import {
  ApiGatewayConnectionApi,
  DynamoBroker,
  DynamoConnectionStore,
  DynamoOutbox,
  DynamoPingerLayoutStore,
  DynamoPresenceStore,
  DynamoRateLimiter,
  DynamoRevocationStore,
  DynamoSessionCache,
  LambdaPingerInvoker,
  LambdaTaskRunner,
} from '../../lib/aws';
import {
  type Broadcaster,
  type Broker,
  ConfigError,
  cachedBuckets,
  composeDelivery,
  composeRealtime,
  createEventSender,
  type Delivery,
  type EventSender,
  EventTopics,
  type Gateway,
  type GatewayConfig,
  LegacyBroker,
  PingerRuns,
  PresenceEvent,
  type PresenceSettings,
  presenceEventOf,
  type Realtime,
  type SessionCache,
} from '../../lib/core';
import { EMULATOR_POST_TIMEOUTS, lambdaClient, managementClient, POST_TIMEOUTS } from './clients';
import { required } from './env';
import { part, runtime } from './instance';
import { registeredSchemas } from './messaging';

/** What the WebSocket side is built over. */
interface WebSocketAdapters {
  readonly store: DynamoConnectionStore;
  readonly api: ApiGatewayConnectionApi;
  readonly sessions: DynamoSessionCache;
  readonly revocations: DynamoRevocationStore;
}

/** The pinger's layout and run reports, in the connections table. */
function pingerLayouts(): DynamoPingerLayoutStore {
  return part(
    'pingerLayouts',
    ({ dynamodb, tables }) =>
      new DynamoPingerLayoutStore({ client: dynamodb, tableName: tables.connections }),
  );
}

/** The connections table, the management API and the session cache, built once per instance. */
function adapters(): WebSocketAdapters {
  return part('adapters', ({ dynamodb, tables, config, logger, record, settings }) => {
    const override = settings.endpoints.management;
    return {
      store: new DynamoConnectionStore({
        client: dynamodb,
        tableName: tables.connections,
        // B of the pinger layout, read at most once a minute per instance.
        buckets: cachedBuckets(pingerLayouts(), { logger }),
      }),
      api: new ApiGatewayConnectionApi({
        ...(override ? { endpoint: override } : {}),
        // One management client per endpoint, each with the call recorder; an emulator's
        // posts get more time than API Gateway's.
        createClient: (endpoint) =>
          managementClient(record, endpoint, override ? EMULATOR_POST_TIMEOUTS : POST_TIMEOUTS),
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

/**
 * The connections table, read only: `httpBroadcast` reads what a remote `disconnect`'s target
 * holds, to commit it in order with broadcasts (`withOrderedDisconnects`).
 */
export function connectionReader(): DynamoConnectionStore {
  return part(
    'connectionReader',
    ({ dynamodb, tables }) =>
      new DynamoConnectionStore({ client: dynamodb, tableName: tables.connections }),
  );
}

/** The Lambda client (`LAMBDACABLE_LAMBDA_ENDPOINT` points it at serverless-offline locally). */
function lambda(): LambdaClient {
  return part('lambda', ({ record, settings }) => lambdaClient(record, settings.endpoints.lambda));
}

/**
 * The pinger's partitions: the coordinator (the scheduled run) starts the other partitions'
 * runs with an asynchronous invoke of this function (`LAMBDACABLE_LAMBDA_ENDPOINT` points
 * it at serverless-offline locally).
 */
export function pingerRuns(): PingerRuns {
  return part('pingerRuns', ({ config, logger, settings }) => {
    const { functionName } = settings;
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
  return part('delivery', ({ config, logger, settings }) => {
    const runner = new LambdaTaskRunner({
      // One attempt: a re-sent Invoke could start a second copy of a task still running.
      client: part('taskLambda', ({ record, settings: { endpoints } }) =>
        lambdaClient(record, endpoints.lambda, 1),
      ),
      functionName: required(settings.deliverFunction, DELIVER_FUNCTION_VARIABLE),
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
