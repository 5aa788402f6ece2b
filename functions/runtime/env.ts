/**
 * The settings of a function, read once from its environment into one typed object and
 * checked there: a missing table or queue fails the first invocation with a clear error, not
 * a call deep in the code.
 */

import { type ConsumerGroupDefinition, consumerGroupsFor } from '../../infra/deploy/consumers';
import {
  DELIVER_FUNCTION_VARIABLE,
  dlqUrlVariable,
  queueUrlVariable,
  RELAY_FAILURES_URL_VARIABLE,
  TABLE_NAMES,
  type TableName,
  tableVariable,
} from '../../infra/deploy/names';
import { ConfigError, configFromEnv, type GatewayConfig } from '../../lib/core';

/** An environment: `process.env`, with the secrets read from their stores. */
export type Env = Readonly<Record<string, string | undefined>>;

/** A function's settings; serverless.yml and `npm start` set the variables. */
export interface Settings {
  /** The gateway's, broker's and fan-out's settings (`configFromEnv`). */
  readonly config: GatewayConfig;
  /** `POWERTOOLS_SERVICE_NAME`. @default 'lambdacable' */
  readonly serviceName: string;
  /** `POWERTOOLS_METRICS_NAMESPACE`. @default 'lambdacable' */
  readonly metricsNamespace: string;
  /** Each table's physical name (`LAMBDACABLE_TABLE_<TABLE>`, required). */
  readonly tables: Readonly<Record<TableName, string>>;
  /** The consumer groups of this deployment (`LAMBDACABLE_EXAMPLE_CONSUMER`). */
  readonly groups: readonly ConsumerGroupDefinition[];
  /** Consumer group → queue URL (`LAMBDACABLE_QUEUE_<GROUP>`, required). */
  readonly queues: Readonly<Record<string, string>>;
  /** Consumer group → DLQ URL (`LAMBDACABLE_DLQ_<GROUP>`). @default none */
  readonly deadLetterQueues: Readonly<Record<string, string | undefined>>;
  /** The relay failures queue (`LAMBDACABLE_RELAY_FAILURES_QUEUE`). @default none */
  readonly relayFailuresQueue: string | undefined;
  /**
   * The deployed name of the `deliver` function (`LAMBDACABLE_DELIVER_FUNCTION`); required by
   * the parts that start fan-out tasks only, when they are built. @default none
   */
  readonly deliverFunction: string | undefined;
  /** This function's name (`AWS_LAMBDA_FUNCTION_NAME`, which Lambda sets). @default none */
  readonly functionName: string | undefined;
  /**
   * Endpoints of local stand-ins (`LAMBDACABLE_DYNAMODB_ENDPOINT`, `…_SQS_…`, `…_LAMBDA_…`,
   * `…_MANAGEMENT_…`). @default the SDK's, and the management API of each request
   */
  readonly endpoints: {
    readonly dynamodb?: string;
    readonly sqs?: string;
    readonly lambda?: string;
    readonly management?: string;
  };
  /** Where the AWS calls are recorded (`LAMBDACABLE_AWS_CALL_LOG`; tests). @default off */
  readonly callLog: string | undefined;
}

/** Reads the settings from an environment; throws a clear error when a setting is missing. */
export function readSettings(env: Env): Settings {
  const groups = consumerGroupsFor(env);
  const endpoint = (name: string) => env[name] || undefined;
  return {
    config: configFromEnv(env),
    serviceName: env.POWERTOOLS_SERVICE_NAME || 'lambdacable',
    metricsNamespace: env.POWERTOOLS_METRICS_NAMESPACE || 'lambdacable',
    tables: Object.fromEntries(
      TABLE_NAMES.map((t) => [t, required(env[tableVariable(t)], tableVariable(t))]),
    ) as Record<TableName, string>,
    groups,
    queues: Object.fromEntries(
      groups.map((g) => [
        g.name,
        required(env[queueUrlVariable(g.name)], queueUrlVariable(g.name)),
      ]),
    ),
    deadLetterQueues: Object.fromEntries(
      groups.map((g) => [g.name, env[dlqUrlVariable(g.name)] || undefined]),
    ),
    relayFailuresQueue: env[RELAY_FAILURES_URL_VARIABLE] || undefined,
    deliverFunction: env[DELIVER_FUNCTION_VARIABLE] || undefined,
    functionName: env.AWS_LAMBDA_FUNCTION_NAME,
    endpoints: {
      dynamodb: endpoint('LAMBDACABLE_DYNAMODB_ENDPOINT'),
      sqs: endpoint('LAMBDACABLE_SQS_ENDPOINT'),
      lambda: endpoint('LAMBDACABLE_LAMBDA_ENDPOINT'),
      management: endpoint('LAMBDACABLE_MANAGEMENT_ENDPOINT'),
    },
    callLog: env.LAMBDACABLE_AWS_CALL_LOG || undefined,
  };
}

/** `value`, or a {@link ConfigError} naming the variable `name` that should have set it. */
export function required(value: string | undefined, name: string): string {
  if (!value) {
    throw new ConfigError(`${name} is not set: serverless.yml or npm start sets it`, {
      variable: name,
    });
  }
  return value;
}
