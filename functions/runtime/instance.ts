/**
 * The runtime of this Lambda instance: its settings, logger and shared clients, built once
 * from the environment (with the secrets read from their stores, functions/secrets.ts), and
 * again when a secret changes; and the cache of the parts built over it.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { TableName } from '../../infra/deploy/names';
import { recordAwsCalls } from '../../lib/aws';
import { ConfigError, type GatewayConfig } from '../../lib/core';
import { dynamodbClient, type Recorder, sqsClient } from './clients';
import { type Env, readSettings, type Settings } from './env';

/** What every handler needs: settings, logger, clients, resource names. */
export interface Runtime {
  readonly config: GatewayConfig;
  /** Every setting of this function, read once (`env.ts`). */
  readonly settings: Settings;
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

let base: Runtime | undefined;
const parts = new Map<string, unknown>();
/** `process.env` with the secrets read from their stores (functions/secrets.ts). */
let withSecretValues: Env | undefined;

/**
 * Builds a part once per instance (and again after a rotation): each part is a function of
 * its own, so a handler's bundle holds only the parts it uses and its cold start builds only
 * those.
 */
export function part<T>(name: string, build: (rt: Runtime) => T): T {
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
  const settings = readSettings(env);
  const { callLog, endpoints } = settings;
  const functionName = settings.functionName ?? 'unknown';
  const record: Recorder = (client) => recordAwsCalls(client, callLog, functionName);
  return {
    config: settings.config,
    settings,
    logger: new Logger({ serviceName: settings.serviceName }),
    dynamodb: dynamodbClient(record, endpoints.dynamodb),
    sqs: sqsClient(record, endpoints.sqs),
    tables: settings.tables,
    queues: settings.queues,
    deadLetterQueues: settings.deadLetterQueues,
    relayFailuresQueue: settings.relayFailuresQueue,
    managementEndpoint: (context) =>
      endpoints.management ?? `https://${context.domainName}/${context.stage}`,
    record,
  };
}
