/**
 * The secrets of the functions that hold one (`wsConnect`, `wsDefault`, `httpBroadcast`): their
 * handlers await {@link withSecrets} first. Its own module, so that no other function's bundle
 * carries Powertools Parameters.
 */

import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { AwsSecrets, recordAwsCalls } from '../lib/aws';
import { errorMessage, resolveSecrets, secretSettings } from '../lib/core';
import { type Runtime, runtime, useSecrets } from './runtime';

let secrets: AwsSecrets | undefined;

/**
 * Reads the secrets this function's environment names by parameter (`LAMBDACABLE_*_PARAM`:
 * SSM Parameter Store or Secrets Manager) at the first invocation, and again once
 * `LAMBDACABLE_SECRETS_MAX_AGE` has passed; within it, nothing is called. A value that changed
 * (a rotation) rebuilds the runtime and its parts, so that the next requests are checked with
 * it. With no parameter (the values set directly: `npm start`, tests) it reads nothing.
 */
export async function withSecrets(): Promise<Runtime> {
  const env = process.env;
  const settings = secretSettings(env);
  if (settings.references.length === 0) return runtime();
  const recorded = <C>(client: C): C =>
    recordAwsCalls(
      client,
      env.LAMBDACABLE_AWS_CALL_LOG || undefined,
      env.AWS_LAMBDA_FUNCTION_NAME ?? 'unknown',
    );
  // The SDK's own AWS_ENDPOINT_URL_SSM and AWS_ENDPOINT_URL_SECRETS_MANAGER point them elsewhere.
  secrets ??= new AwsSecrets({
    ssm: recorded(new SSMClient({ cacheMiddleware: true })),
    secretsManager: recorded(new SecretsManagerClient({ cacheMiddleware: true })),
    maxAge: settings.maxAge,
    onStale: (reference, error) =>
      runtime().logger.warn('secret not read again: the value read before is used', {
        variable: reference.variable,
        parameter: reference.id,
        error: errorMessage(error),
      }),
  });
  const reader = secrets;
  const resolved = await resolveSecrets(env, settings, (r) => reader.read(r));
  useSecrets(
    resolved,
    settings.references.map((r) => r.variable),
  );
  return runtime();
}
