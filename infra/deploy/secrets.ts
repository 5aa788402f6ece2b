/**
 * The secrets of a deploy: which parameter holds each (`custom.secrets` in serverless.yml),
 * the `…_PARAM` variables of the functions that read them, and the IAM statements that let
 * exactly those functions read exactly those parameters. A deployed function gets the name of
 * a parameter, never its value: no secret is in the packaged template.
 */

import { ConfigError } from '../../lib/kernel/errors';
import {
  PARAMETER_SUFFIX,
  SECRET_VARIABLES,
  secretSettings,
} from '../../lib/realtime/auth/secret-settings';

/** A secret setting, e.g. `LAMBDACABLE_JWT_SECRET`. */
export type SecretVariable = (typeof SECRET_VARIABLES)[number];

/** The keys of `custom.secrets` in serverless.yml, and the settings they hold the parameter of. */
export const SECRET_KEYS: Readonly<Record<string, SecretVariable>> = {
  jwt: 'LAMBDACABLE_JWT_SECRET',
  jwtPrevious: 'LAMBDACABLE_JWT_SECRET_PREVIOUS',
  streams: 'LAMBDACABLE_STREAMS_SECRET',
  streamsPrevious: 'LAMBDACABLE_STREAMS_SECRET_PREVIOUS',
  broadcastKey: 'LAMBDACABLE_BROADCAST_KEY',
  broadcastKeyPrevious: 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS',
};

/** Setting → where its value is stored (an SSM parameter, or `secretsmanager:<name>`). */
export type SecretParameters = Readonly<Partial<Record<SecretVariable, string>>>;

/** The default parameters of a stage: `/lambdacable/<stage>/jwt-secret` and so on. */
export function defaultSecretParameters(stage: string): SecretParameters {
  const out: Partial<Record<SecretVariable, string>> = {};
  for (const variable of SECRET_VARIABLES) {
    const name = variable
      .replace(/^LAMBDACABLE_/, '')
      .toLowerCase()
      .replace(/_/g, '-');
    out[variable] = `/lambdacable/${stage}/${name}`;
  }
  return out;
}

/** `custom.secrets` (keys of {@link SECRET_KEYS}) as settings → parameters; empty ones left out. */
export function secretParameters(custom: Readonly<Record<string, unknown>>): SecretParameters {
  const out: Partial<Record<SecretVariable, string>> = {};
  for (const [key, value] of Object.entries(custom ?? {})) {
    const variable = SECRET_KEYS[key];
    if (!variable) {
      throw new ConfigError(
        `custom.secrets.${key} is not a secret: expected one of ${Object.keys(SECRET_KEYS).join(', ')}`,
        { variable: `custom.secrets.${key}` },
      );
    }
    if (typeof value === 'string' && value.trim()) out[variable] = value.trim();
  }
  return out;
}

/**
 * The secret variables of a function that reads `variables`. Deployed: each one's `…_PARAM`,
 * the parameter's name. Under `serverless offline` (`npm start`, `offlineValues` given): the
 * values set in that environment, as they are, and no parameter (nothing local reads SSM).
 */
export function secretEnvironment(
  variables: readonly SecretVariable[],
  parameters: SecretParameters,
  offlineValues?: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const variable of variables) {
    if (offlineValues) {
      const value = offlineValues[variable];
      if (value) out[variable] = value;
      continue;
    }
    const parameter = parameters[variable];
    if (parameter) out[`${variable}${PARAMETER_SUFFIX}`] = parameter;
  }
  return out;
}

// biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON.
type Json = any;

/**
 * The IAM statements that let a function read the parameters of `variables`: `ssm:GetParameter`
 * on each SSM parameter, `secretsmanager:GetSecretValue` on each secret. A SecureString
 * encrypted with the AWS managed key `aws/ssm` (or a secret with `aws/secretsmanager`) needs
 * no `kms:Decrypt` grant: that key's policy lets the service decrypt for any principal of the
 * account allowed the read. A customer managed key needs one (docs/configuration.md, "Secrets").
 */
export function secretStatements(
  variables: readonly SecretVariable[],
  parameters: SecretParameters,
): Json[] {
  const env: Record<string, string> = {};
  for (const variable of variables) {
    const parameter = parameters[variable];
    if (parameter) env[`${variable}${PARAMETER_SUFFIX}`] = parameter;
  }
  const { references } = secretSettings(env);
  const ssm = references.filter((r) => r.store === 'ssm').map((r) => ssmParameterArn(r.id));
  const secrets = references
    .filter((r) => r.store === 'secretsmanager')
    .map((r) => secretArn(r.id));
  return [
    ...(ssm.length ? [{ Effect: 'Allow', Action: ['ssm:GetParameter'], Resource: ssm }] : []),
    ...(secrets.length
      ? [{ Effect: 'Allow', Action: ['secretsmanager:GetSecretValue'], Resource: secrets }]
      : []),
  ];
}

/** An SSM parameter's ARN from its name (a path or a plain name) or ARN. */
export function ssmParameterArn(id: string): Json {
  if (id.startsWith('arn:')) return id;
  return {
    'Fn::Sub': `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter/${id.replace(/^\//, '')}`,
  };
}

/**
 * A Secrets Manager secret's ARN pattern from its name (Secrets Manager appends `-` and six
 * random characters to it) or its full ARN.
 */
export function secretArn(id: string): Json {
  if (id.startsWith('arn:')) return id;
  return {
    'Fn::Sub': `arn:\${AWS::Partition}:secretsmanager:\${AWS::Region}:\${AWS::AccountId}:secret:${id}-??????`,
  };
}

/** Whether a command line runs `serverless offline` (its commands are the words before the first option). */
export function isOfflineCommand(argv: readonly string[]): boolean {
  const first = argv.findIndex((a) => a.startsWith('-'));
  const commands = argv.slice(0, first === -1 ? undefined : first);
  return commands[0] === 'offline';
}
