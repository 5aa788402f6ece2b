import { ConfigError } from '../../kernel/errors.js';
import { checkSecretKey } from './settings.js';

type Env = Readonly<Record<string, string | undefined>>;

/** The secret settings; each `_PREVIOUS` one holds the key before a rotation. */
export const SECRET_VARIABLES = [
  'LAMBDACABLE_JWT_SECRET',
  'LAMBDACABLE_JWT_SECRET_PREVIOUS',
  'LAMBDACABLE_STREAMS_SECRET',
  'LAMBDACABLE_STREAMS_SECRET_PREVIOUS',
  'LAMBDACABLE_BROADCAST_KEY',
  'LAMBDACABLE_BROADCAST_KEY_PREVIOUS',
] as const;

/** Appended to a secret variable's name, the variable names where its value is stored. */
export const PARAMETER_SUFFIX = '_PARAM';

/** The prefix of a Secrets Manager secret's name (or ARN) in a `…_PARAM` variable. */
export const SECRETS_MANAGER_PREFIX = 'secretsmanager:';

/** Where one secret setting's value is stored, from its `…_PARAM` variable. */
export interface SecretReference {
  /** The setting it is the value of, e.g. `LAMBDACABLE_JWT_SECRET`. */
  readonly variable: string;
  /** `ssm`: a Parameter Store parameter (SecureString); `secretsmanager`: a secret's string. */
  readonly store: 'ssm' | 'secretsmanager';
  /** The parameter's name or ARN, or the secret's name or ARN. */
  readonly id: string;
  /**
   * A `_PREVIOUS` key's: a parameter that does not exist leaves the setting unset (no
   * rotation going on). Any other missing parameter is a {@link ConfigError}.
   */
  readonly optional: boolean;
}

/** What {@link secretSettings} reads. */
export interface SecretSettings {
  /** The secrets to read from their stores: set by parameter, not by value. */
  readonly references: readonly SecretReference[];
  /**
   * Seconds a value read from its store is used before it is read again
   * (`LAMBDACABLE_SECRETS_MAX_AGE`): how long a rotation takes to reach every instance.
   * @default 300
   */
  readonly maxAge: number;
}

/** How long a secret read from its store is kept, in seconds. */
export const DEFAULT_SECRETS_MAX_AGE = 300;

/**
 * The secrets an environment names by parameter: for each of {@link SECRET_VARIABLES}, its
 * `…_PARAM` variable names an SSM parameter (its name or ARN), or a Secrets Manager secret
 * (`secretsmanager:<name or ARN>`, or the secret's ARN). A value set directly (local runs,
 * tests) wins over its parameter. Pure, as `configFromEnv` is.
 */
export function secretSettings(env: Env): SecretSettings {
  const references: SecretReference[] = [];
  for (const variable of SECRET_VARIABLES) {
    if (env[variable]) continue;
    const id = env[`${variable}${PARAMETER_SUFFIX}`]?.trim();
    if (!id) continue;
    const optional = variable.endsWith('_PREVIOUS');
    if (id.startsWith(SECRETS_MANAGER_PREFIX)) {
      const secret = id.slice(SECRETS_MANAGER_PREFIX.length);
      references.push({ variable, store: 'secretsmanager', id: secret, optional });
    } else if (/^arn:[^:]+:secretsmanager:/.test(id)) {
      references.push({ variable, store: 'secretsmanager', id, optional });
    } else {
      references.push({ variable, store: 'ssm', id, optional });
    }
  }
  const age = env.LAMBDACABLE_SECRETS_MAX_AGE?.trim();
  let maxAge = DEFAULT_SECRETS_MAX_AGE;
  if (age) {
    maxAge = Number(age);
    if (!Number.isInteger(maxAge) || maxAge <= 0) {
      throw new ConfigError(
        `LAMBDACABLE_SECRETS_MAX_AGE must be a positive integer (seconds), got: ${age}`,
        { variable: 'LAMBDACABLE_SECRETS_MAX_AGE' },
      );
    }
  }
  return { references, maxAge };
}

/** Where a reference points, for messages: `SSM parameter /x (LAMBDACABLE_X_PARAM)`. */
export function describeReference(reference: SecretReference): string {
  const where = reference.store === 'ssm' ? 'SSM parameter' : 'Secrets Manager secret';
  return `${where} ${reference.id} (${reference.variable}${PARAMETER_SUFFIX})`;
}

/**
 * Reads every referenced secret with `read` (the value, or `undefined` when the parameter does
 * not exist) and returns the environment with the values set, so that `configFromEnv` reads
 * it as if they had been set directly. A missing parameter of a current key, or a value under
 * 32 bytes, is a {@link ConfigError} naming the variable and the parameter, never the value.
 */
export async function resolveSecrets(
  env: Env,
  settings: SecretSettings,
  read: (reference: SecretReference) => Promise<string | undefined>,
): Promise<Record<string, string | undefined>> {
  const values = await Promise.all(settings.references.map((r) => read(r)));
  const out: Record<string, string | undefined> = { ...env };
  for (const [i, reference] of settings.references.entries()) {
    const value = values[i];
    const variable = `${reference.variable}${PARAMETER_SUFFIX}`;
    if (value === undefined || value === '') {
      if (reference.optional) continue;
      throw new ConfigError(
        `${describeReference(reference)} does not exist or is empty: create it (docs/configuration.md, "Secrets")`,
        { variable },
      );
    }
    checkSecretKey(reference.variable, value, `from ${describeReference(reference)}`);
    out[reference.variable] = value;
  }
  return out;
}
