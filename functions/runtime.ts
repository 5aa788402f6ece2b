/**
 * The composition root: the one place that reads the environment and wires the library's
 * adapters for the Lambda handlers in this folder. Built once per Lambda instance.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { queueUrlVariable, tableVariable } from '../infra/cloudformation';
import { consumerGroups, type TableName, tables as tableDefinitions } from '../infra/definitions';
import {
  ApiGatewayConnectionApi,
  AvroCodec,
  BROADCAST_TOPIC,
  configFromEnv,
  DynamoAckStore,
  DynamoBroker,
  DynamoConnectionStore,
  DynamoSchemaRegistry,
  Gateway,
  GatewayBroadcaster,
  type GatewayConfig,
  OutboxProducer,
  OutboxRelay,
} from '../lib';

/** Everything a handler needs. */
export interface Runtime {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  /** CloudWatch metrics in embedded metric format; handlers publish what they add. */
  readonly metrics: Metrics;
  readonly dynamodb: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly tables: Readonly<Record<TableName, string>>;
  /** Consumer group → queue URL. */
  readonly queues: Readonly<Record<string, string>>;
  readonly codec: AvroCodec;
  readonly store: DynamoConnectionStore;
  readonly api: ApiGatewayConnectionApi;
  readonly broker: DynamoBroker;
  readonly gateway: Gateway;
  readonly relay: OutboxRelay;
  readonly acks: DynamoAckStore;
  /** Writes broadcasts to the outbox (the log), never to SQS directly. */
  readonly producer: OutboxProducer;
  /** The function that delivers `welcome` after `$connect`. */
  readonly welcomeFunction: string;
  /** A local Lambda endpoint (serverless-offline) to invoke functions on, if any. */
  readonly lambdaEndpoint: string | undefined;
  /** The management API endpoint of a WebSocket request. */
  managementEndpoint(context: { domainName?: string; stage?: string }): string;
}

let instance: Runtime | undefined;

/** The runtime of this Lambda instance, built from `process.env` on first use. */
export function runtime(): Runtime {
  instance ??= buildRuntime(process.env);
  return instance;
}

/** Builds a runtime from an environment; throws a clear error when a setting is missing. */
export function buildRuntime(env: Readonly<Record<string, string | undefined>>): Runtime {
  const config = configFromEnv(env);
  const serviceName = env.POWERTOOLS_SERVICE_NAME || 'lambdacable';
  const logger = new Logger({ serviceName });
  const metrics = new Metrics({
    serviceName,
    namespace: env.POWERTOOLS_METRICS_NAMESPACE || 'lambdacable',
  });
  const dynamodbEndpoint = env.LAMBDACABLE_DYNAMODB_ENDPOINT || undefined;
  const sqsEndpoint = env.LAMBDACABLE_SQS_ENDPOINT || undefined;
  const managementOverride = env.LAMBDACABLE_MANAGEMENT_ENDPOINT || undefined;
  const dynamodb = new DynamoDBClient(dynamodbEndpoint ? { endpoint: dynamodbEndpoint } : {});
  const sqs = new SQSClient(sqsEndpoint ? { endpoint: sqsEndpoint } : {});

  const tables = Object.fromEntries(
    (Object.keys(tableDefinitions) as TableName[]).map((t) => [t, required(env, tableVariable(t))]),
  ) as Record<TableName, string>;
  const queues = Object.fromEntries(
    consumerGroups.map((g) => [g.name, required(env, queueUrlVariable(g.name))]),
  );
  const routes: Record<string, string[]> = {};
  for (const group of consumerGroups) {
    for (const topic of group.topics)
      routes[topic] = [...(routes[topic] ?? []), queues[group.name]!];
  }

  const store = new DynamoConnectionStore({ client: dynamodb, tableName: tables.connections });
  const api = new ApiGatewayConnectionApi(
    managementOverride ? { endpoint: managementOverride } : {},
  );
  const broadcaster = new GatewayBroadcaster({ store, api, logger });
  const broker = new DynamoBroker({
    client: dynamodb,
    historyTable: tables.history,
    sessionsTable: tables.sessions,
    broadcaster,
    config: config.broker,
  });
  return {
    config,
    logger,
    metrics,
    dynamodb,
    sqs,
    tables,
    queues,
    codec: new AvroCodec(new DynamoSchemaRegistry({ client: dynamodb, tableName: tables.schemas })),
    store,
    api,
    broker,
    gateway: new Gateway({ store, broker, api, config, logger }),
    relay: new OutboxRelay({
      sqs,
      routes,
      onSkipped: (reason, seq) => logger.error('outbox record skipped', { reason, seq }),
    }),
    acks: new DynamoAckStore({ client: dynamodb, tableName: tables.acks }),
    producer: new OutboxProducer({
      client: dynamodb,
      tableName: tables.outbox,
      topic: BROADCAST_TOPIC,
    }),
    welcomeFunction: env.LAMBDACABLE_WELCOME_FUNCTION || 'lambdacable-dev-wsWelcome',
    lambdaEndpoint: env.LAMBDACABLE_LAMBDA_ENDPOINT || undefined,
    managementEndpoint: (context) =>
      managementOverride ?? `https://${context.domainName}/${context.stage}`,
  };
}

function required(env: Readonly<Record<string, string | undefined>>, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set: serverless.yml or npm start sets it`);
  return value;
}
