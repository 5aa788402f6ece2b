import { ParameterNotFoundError } from '@aws-lambda-powertools/parameters';
import { SecretsProvider } from '@aws-lambda-powertools/parameters/secrets';
import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { ConfigError, errorMessage } from '../../kernel/errors.js';
import {
  DEFAULT_SECRETS_MAX_AGE,
  describeReference,
  PARAMETER_SUFFIX,
  type SecretReference,
} from '../../realtime/auth/secret-settings.js';

/** Options of {@link AwsSecrets}. */
export interface AwsSecretsOptions {
  /** Reads SSM parameters (`GetParameter` with decryption). */
  readonly ssm: SSMClient;
  /** Reads Secrets Manager secrets (`GetSecretValue`). */
  readonly secretsManager: SecretsManagerClient;
  /**
   * Seconds a value is used before it is read again (Powertools Parameters' `maxAge`).
   * @default 300
   */
  readonly maxAge?: number;
  /**
   * Told when a read again fails and the value read before is used instead: a throttled or
   * unreachable store never fails an instance that already has its secrets.
   * @default ignored
   */
  readonly onStale?: (reference: SecretReference, error: unknown) => void;
}

/**
 * Reads secrets from SSM Parameter Store (SecureString, decrypted) and Secrets Manager with
 * Powertools Parameters, each kept for `maxAge` seconds: a read within it calls nothing.
 */
export class AwsSecrets {
  private readonly ssm: SSMProvider;
  private readonly secretsManager: SecretsProvider;
  private readonly maxAge: number;
  /** The last value read of each secret: used when a read again fails. */
  private readonly last = new Map<string, string>();
  /**
   * Until when a parameter that does not exist is taken as missing (Powertools caches only
   * values): a `_PREVIOUS` key outside a rotation costs one read per `maxAge`, not one per call.
   * On `Date.now()`, as Powertools' cache is.
   */
  private readonly missingUntil = new Map<string, number>();

  constructor(private readonly options: AwsSecretsOptions) {
    this.ssm = new SSMProvider({ awsSdkV3Client: options.ssm });
    this.secretsManager = new SecretsProvider({ awsSdkV3Client: options.secretsManager });
    this.maxAge = options.maxAge ?? DEFAULT_SECRETS_MAX_AGE;
  }

  /**
   * The value of a secret, or `undefined` when its parameter does not exist. Any other
   * failure is a ConfigError naming the parameter (its cause kept), unless a value was read
   * before: that one is used until a read succeeds.
   */
  async read(reference: SecretReference): Promise<string | undefined> {
    const key = `${reference.store} ${reference.id}`;
    if ((this.missingUntil.get(key) ?? 0) > Date.now()) return undefined;
    try {
      const value = await this.fetch(reference);
      this.missingUntil.delete(key);
      if (value === undefined) this.last.delete(key);
      else this.last.set(key, value);
      return value;
    } catch (error) {
      if (error instanceof ParameterNotFoundError) {
        this.last.delete(key);
        this.missingUntil.set(key, Date.now() + this.maxAge * 1000);
        return undefined;
      }
      const last = this.last.get(key);
      if (last !== undefined) {
        this.options.onStale?.(reference, error);
        return last;
      }
      throw new ConfigError(`cannot read ${describeReference(reference)}: ${errorMessage(error)}`, {
        variable: `${reference.variable}${PARAMETER_SUFFIX}`,
        cause: error,
      });
    }
  }

  private async fetch(reference: SecretReference): Promise<string | undefined> {
    const options = { maxAge: this.maxAge, throwOnMissing: true } as const;
    const value =
      reference.store === 'ssm'
        ? await this.ssm.get(reference.id, { ...options, decrypt: true })
        : await this.secretsManager.get(reference.id, options);
    // A binary secret is not a key this reads.
    return typeof value === 'string' ? value : undefined;
  }
}
