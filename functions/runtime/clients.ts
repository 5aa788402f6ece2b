/** The AWS SDK clients of a function, each with the call recorder and the endpoint it is given. */

import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';

/**
 * Settings of every SDK client. `cacheMiddleware` resolves a command's middleware chain once
 * per client and command type instead of on every call: a fan-out makes a `PostToConnection`
 * per subscriber, and resolving the chain was 13–24% of each call's CPU (`npm run bench`). The
 * call recorder is added right after a client is built, before its first call, as the cache
 * requires.
 */
export const CLIENT_DEFAULTS = { cacheMiddleware: true } as const;

/** Applies the call recorder to a client. */
export type Recorder = <C>(client: C) => C;

const at = (endpoint: string | undefined) => (endpoint ? { endpoint } : {});

/** A DynamoDB client (`endpoint`: DynamoDB Local's). */
export function dynamodbClient(record: Recorder, endpoint: string | undefined): DynamoDBClient {
  return record(new DynamoDBClient({ ...CLIENT_DEFAULTS, ...at(endpoint) }));
}

/** An SQS client (`endpoint`: fauxqs'). */
export function sqsClient(record: Recorder, endpoint: string | undefined): SQSClient {
  return record(new SQSClient({ ...CLIENT_DEFAULTS, ...at(endpoint) }));
}

/**
 * The Lambda client (`endpoint`: serverless-offline's, locally); `maxAttempts` 1 for one that
 * must never send an Invoke twice (the fan-out's tasks).
 */
export function lambdaClient(
  record: Recorder,
  endpoint: string | undefined,
  maxAttempts?: number,
): LambdaClient {
  return record(
    new LambdaClient({
      ...CLIENT_DEFAULTS,
      ...at(endpoint),
      ...(maxAttempts === undefined ? {} : { maxAttempts }),
    }),
  );
}

/**
 * How long one post may take, in ms: to open a connection, and for the answer. A post takes
 * 10 to 30 ms; without a limit, one that the endpoint never answers would hold its task until
 * the function times out (and a parent's retry would post its whole part again). A post
 * that times out fails with the SDK's `TimeoutError` and is tried again in a later pass.
 */
export const POST_TIMEOUTS = {
  connectionTimeout: 1_000,
  requestTimeout: 3_000,
  // Without it, the SDK only logs a WARN when the request timeout passes, and waits on.
  throwOnRequestTimeout: true,
} as const;

/**
 * The post timeouts against an emulator of the management API (`LAMBDACABLE_MANAGEMENT_ENDPOINT`
 * set: serverless-offline, or the scale run's stand-in): serverless-offline answers a post in
 * seconds under a crowd of clients on a loaded machine, where API Gateway takes 10 to 30 ms.
 */
export const EMULATOR_POST_TIMEOUTS = {
  connectionTimeout: 10_000,
  requestTimeout: 30_000,
  throwOnRequestTimeout: true,
} as const;

/**
 * A management API client for one endpoint. It makes one attempt, within `timeouts`
 * ({@link POST_TIMEOUTS} on AWS): the adapter retries throttles and 5xx itself, then the
 * fan-out in later passes.
 */
export function managementClient(
  record: Recorder,
  endpoint: string,
  timeouts: typeof POST_TIMEOUTS | typeof EMULATOR_POST_TIMEOUTS = POST_TIMEOUTS,
): ApiGatewayManagementApiClient {
  return record(
    new ApiGatewayManagementApiClient({
      ...CLIENT_DEFAULTS,
      endpoint,
      maxAttempts: 1,
      requestHandler: timeouts,
    }),
  );
}
