import { type Env, envAtLeastZero, envFlag, envPositive, envText } from '../../kernel/env.js';
import { ConfigError } from '../../kernel/errors.js';

/** Who may connect, which streams they may read, and who may broadcast. */
export interface AuthConfig {
  /**
   * HS256 secret of connect tokens (`LAMBDACABLE_JWT_SECRET`); unset: every token is refused.
   * @default undefined
   */
  readonly jwtSecret?: string;
  /**
   * The JWT secret before a rotation (`LAMBDACABLE_JWT_SECRET_PREVIOUS`): tokens signed with it
   * are still accepted until it is unset. @default undefined
   */
  readonly jwtPreviousSecret?: string;
  /**
   * The longest a connect token is accepted after its `iat`, in seconds
   * (`LAMBDACABLE_JWT_MAX_AGE`); set, a token without `iat` is refused. Unset: only `exp`
   * bounds it. @default undefined
   */
  readonly jwtMaxAge?: number;
  /**
   * Seconds a connect token's `exp` may be off the clock (`LAMBDACABLE_JWT_CLOCK_SKEW`).
   * @default 30
   */
  readonly jwtClockSkew: number;
  /**
   * Required `iss` of connect tokens (`LAMBDACABLE_JWT_ISSUER`); unset: not checked.
   * @default undefined
   */
  readonly jwtIssuer?: string;
  /**
   * Required `aud` of connect tokens (`LAMBDACABLE_JWT_AUDIENCE`); unset: not checked.
   * @default undefined
   */
  readonly jwtAudience?: string;
  /**
   * Secret of signed stream names (`LAMBDACABLE_STREAMS_SECRET`); unset: signed streams are refused.
   * @default undefined
   */
  readonly streamsSecret?: string;
  /**
   * The streams secret before a rotation (`LAMBDACABLE_STREAMS_SECRET_PREVIOUS`): names signed
   * with it still verify until it is unset. @default undefined
   */
  readonly streamsPreviousSecret?: string;
  /**
   * Bearer key of the HTTP broadcast API (`LAMBDACABLE_BROADCAST_KEY`); unset: every request is refused.
   * @default undefined
   */
  readonly broadcastKey?: string;
  /**
   * The broadcast key before a rotation (`LAMBDACABLE_BROADCAST_KEY_PREVIOUS`): still accepted
   * until it is unset. @default undefined
   */
  readonly broadcastPreviousKey?: string;
  /**
   * Whether clients may subscribe to unsigned stream names (`LAMBDACABLE_PUBLIC_STREAMS`).
   * @default false
   */
  readonly publicStreams: boolean;
  /**
   * The names public (unsigned) streams may have (`LAMBDACABLE_PUBLIC_STREAM_PREFIX`): only a
   * `stream_name` starting with it is accepted, so a stream meant to be signed-only can never
   * be read by its plain name. Set to the empty string: any name (AnyCable's behaviour).
   * @default 'public:'
   */
  readonly publicStreamPrefix: string;
  /**
   * Whether a client without a token is accepted, with an empty identity (`LAMBDACABLE_ALLOW_ANONYMOUS`).
   * @default false
   */
  readonly allowAnonymous: boolean;
}

/** Public stream names start with this unless `LAMBDACABLE_PUBLIC_STREAM_PREFIX` says otherwise. */
export const DEFAULT_PUBLIC_STREAM_PREFIX = 'public:';

/** The fewest bytes a secret key may have: 256 bits, HS256's own key size. */
export const MIN_SECRET_BYTES = 32;

/** The defaults of {@link AuthConfig}. */
export function defaultAuthConfig(): AuthConfig {
  return {
    jwtClockSkew: 30,
    publicStreams: false,
    publicStreamPrefix: DEFAULT_PUBLIC_STREAM_PREFIX,
    allowAnonymous: false,
  };
}

/** Reads {@link AuthConfig} from an environment; secret keys are checked for their size. */
export function authConfigFromEnv(env: Env): AuthConfig {
  const d = defaultAuthConfig();
  const secrets = {
    jwtSecret: key(env, 'LAMBDACABLE_JWT_SECRET'),
    jwtPreviousSecret: key(env, 'LAMBDACABLE_JWT_SECRET_PREVIOUS'),
    streamsSecret: key(env, 'LAMBDACABLE_STREAMS_SECRET'),
    streamsPreviousSecret: key(env, 'LAMBDACABLE_STREAMS_SECRET_PREVIOUS'),
    broadcastKey: key(env, 'LAMBDACABLE_BROADCAST_KEY'),
    broadcastPreviousKey: key(env, 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS'),
    jwtIssuer: envText(env, 'LAMBDACABLE_JWT_ISSUER'),
    jwtAudience: envText(env, 'LAMBDACABLE_JWT_AUDIENCE'),
  };
  return {
    jwtClockSkew: envAtLeastZero(
      env,
      'LAMBDACABLE_JWT_CLOCK_SKEW',
      d.jwtClockSkew,
      'a number of seconds',
      Number.isFinite,
    ),
    ...(envText(env, 'LAMBDACABLE_JWT_MAX_AGE') === undefined
      ? {}
      : { jwtMaxAge: envPositive(env, 'LAMBDACABLE_JWT_MAX_AGE', 0, true) }),
    ...(Object.fromEntries(Object.entries(secrets).filter(([, v]) => v !== undefined)) as Partial<
      typeof secrets
    >),
    publicStreams: envFlag(env, 'LAMBDACABLE_PUBLIC_STREAMS', d.publicStreams),
    // Unset: the default prefix; set to '' (not unset): any name, as AnyCable.
    publicStreamPrefix: env.LAMBDACABLE_PUBLIC_STREAM_PREFIX ?? d.publicStreamPrefix,
    allowAnonymous: envFlag(env, 'LAMBDACABLE_ALLOW_ANONYMOUS', d.allowAnonymous),
  };
}

/** A secret key: unset, or at least {@link MIN_SECRET_BYTES} bytes (never shown in the error). */
function key(env: Env, name: string): string | undefined {
  const value = envText(env, name);
  if (value === undefined) return undefined;
  checkSecretKey(name, value);
  return value;
}

/**
 * Throws {@link ConfigError} naming the variable (and, when given, where its value was read
 * from) when a secret key has fewer than {@link MIN_SECRET_BYTES} bytes; never shows the value.
 */
export function checkSecretKey(name: string, value: string, from?: string): void {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes < MIN_SECRET_BYTES) {
    throw new ConfigError(
      `${name}${from ? ` (${from})` : ''} is ${bytes} bytes, a key needs at least ${MIN_SECRET_BYTES} (256 bits): generate one with \`openssl rand -base64 32\``,
      { variable: name },
    );
  }
}
