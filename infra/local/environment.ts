/**
 * The stage the local stack runs and the environment its functions run with: the local
 * endpoints and credentials, the tables' and queues' names under the variables the deploy
 * gives them (infra/deploy/names.ts), and the caller's settings.
 */

import type { ConsumerGroupDefinition } from '../deploy/consumers';
import {
  dlqUrlVariable,
  EXAMPLE_CONSUMER_VARIABLE,
  queueUrlVariable,
  RELAY_FAILURES_URL_VARIABLE,
  type TableName,
  tableVariable,
} from '../deploy/names';
import type { LocalResources } from './resources';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './services';

/** The stage `npm start` runs; physical names are `lambdacable-local-*`. */
export const LOCAL_STAGE = 'local';
/** The physical name prefix of the local stack, `<service>-<stage>`. */
export const LOCAL_PREFIX = `lambdacable-${LOCAL_STAGE}`;

/** What the functions' environment is made of. */
export interface FunctionsEnvironmentOptions {
  readonly dynamodbEndpoint: string;
  readonly sqsEndpoint: string;
  readonly resources: LocalResources;
  readonly groups: readonly ConsumerGroupDefinition[];
  /** Whether the example consumer group runs (`LAMBDACABLE_EXAMPLE_CONSUMER`). */
  readonly exampleConsumer: boolean;
  /** The build folder, `LAMBDACABLE_BUILD_DIR` of this process. @default '.esbuild-local' */
  readonly buildDir: string | undefined;
  /** Whether serverless-offline rebuilds on a change. */
  readonly watch?: boolean;
  /** The caller's settings (secrets, switches), over the rest. */
  readonly env?: Readonly<Record<string, string>>;
}

/** The environment the functions run with under serverless-offline (before its ports). */
export function functionsEnvironment(options: FunctionsEnvironmentOptions): Record<string, string> {
  const { resources } = options;
  const base: Record<string, string> = {
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    AWS_REGION: LOCAL_REGION,
    AWS_DEFAULT_REGION: LOCAL_REGION,
    LAMBDACABLE_DYNAMODB_ENDPOINT: options.dynamodbEndpoint,
    LAMBDACABLE_SQS_ENDPOINT: options.sqsEndpoint,
    LAMBDACABLE_SCHEDULE_PINGER: 'false',
    // serverless.cjs and the functions declare the same consumer groups as the pollers here.
    [EXAMPLE_CONSUMER_VARIABLE]: String(options.exampleConsumer),
    // Its own build folder (a deploy never ships a local build) with source maps.
    LAMBDACABLE_BUILD_DIR: options.buildDir || '.esbuild-local',
    LAMBDACABLE_SOURCEMAPS: 'true',
    ...(options.watch === false ? { LAMBDACABLE_WATCH: 'off' } : {}),
    ...options.env,
  };
  for (const table of Object.keys(resources.tables) as TableName[]) {
    base[tableVariable(table)] = resources.tables[table];
  }
  for (const group of options.groups) {
    const queue = resources.queues[group.name];
    if (queue) base[queueUrlVariable(group.name)] = queue.url;
    if (queue) base[dlqUrlVariable(group.name)] = queue.dlqUrl;
  }
  if (resources.relayFailuresUrl) base[RELAY_FAILURES_URL_VARIABLE] = resources.relayFailuresUrl;
  return base;
}
