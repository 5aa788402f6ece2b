import {
  type BrokerConfig,
  DEFAULT_STREAM_META_TTL,
  defaultBrokerConfig,
} from '../broker/types.js';
import { ConfigError } from '../kernel/errors.js';
import { DEFAULT_ACK_TTL_SECONDS } from '../messaging/ack-store.js';
import { DEFAULT_RETRY_BACKOFF_MS, DEFAULT_RETRY_PASSES } from './fanout/fanout.js';
import { DEFAULT_PRESENCE_TTL_SECONDS } from './presence/presence.js';

/** Settings of the WebSocket gateway, read once at start ({@link configFromEnv}). */
export interface GatewayConfig {
  /**
   * Seconds between pings of a connection that did not choose its own with `pi`
   * (`LAMBDACABLE_PING_INTERVAL`); the client's monitor expects one at least every 6 s by
   * default.
   * @default 3
   */
  readonly pingInterval: number;
  /**
   * Milliseconds between the pinger's reads of new connections (`LAMBDACABLE_PINGER_TICK_MS`):
   * the delay of a welcome, and the pinger's fixed cost (a Query per bucket per tick).
   * @default 250
   */
  readonly pingerTick: number;
  /**
   * Pings per second one pinger partition is planned for (`LAMBDACABLE_PINGER_PARTITION_RATE`):
   * each minute the pinger runs K partitions, K the power of two at or above the pings per
   * second of all connections (the sum of `1 / pi`) divided by this.
   * @default 200
   */
  readonly pingerPartitionRate: number;
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
   * The most subscriptions one connection may hold (`LAMBDACABLE_MAX_SUBSCRIPTIONS`); one
   * more is refused with `reject_subscription`.
   * @default 128
   */
  readonly maxSubscriptions: number;
  /**
   * Whether a client without a token is accepted, with an empty identity (`LAMBDACABLE_ALLOW_ANONYMOUS`).
   * @default false
   */
  readonly allowAnonymous: boolean;
  /**
   * Whether whispers are allowed on signed streams (`LAMBDACABLE_WHISPER_ON_SIGNED`); public
   * streams always allow them.
   * @default false
   */
  readonly whisperOnSigned: boolean;
  /**
   * Largest client frame accepted, in bytes (`LAMBDACABLE_MAX_FRAME_BYTES`): API Gateway's frame limit.
   * @default 32768
   */
  readonly maxFrameBytes: number;
  /**
   * Tokens per second of each connection's bucket (`LAMBDACABLE_RATE_LIMIT`): every
   * `subscribe`, `history`, `whisper`, `message`, `join` and `presence` takes one; `0` turns
   * the limit off (no read or write of the bucket per frame).
   * @default 10
   */
  readonly rateLimit: number;
  /**
   * Tokens a connection's bucket holds (`LAMBDACABLE_RATE_BURST`): the most of those frames a
   * rested connection sends at once, and the refusals in a row after which it is disconnected
   * (`too_many_requests`).
   * @default 50
   */
  readonly rateBurst: number;
  /** Seconds a connection that drops without leaving stays present (`LAMBDACABLE_PRESENCE_TTL`). @default 15 */
  readonly presenceTtl: number;
  /**
   * Later passes of a fan-out over the posts that failed, each for just the connections still
   * missing the frame (`LAMBDACABLE_POST_RETRY_PASSES`); 0 gives up after the first.
   * @default 5
   */
  readonly postRetryPasses: number;
  /**
   * Milliseconds before the first later pass, doubled per pass with jitter
   * (`LAMBDACABLE_POST_RETRY_BACKOFF_MS`).
   * @default 100
   */
  readonly postRetryBackoffMs: number;
  /**
   * The most subscribers one invocation posts a frame to (`LAMBDACABLE_FANOUT_TASK_SIZE`): a
   * larger audience is delivered by fan-out tasks, each an invocation of the `deliver` function.
   * @default 500
   */
  readonly fanoutTaskSize: number;
  /**
   * Milliseconds a fan-out task keeps posting again to the connections it was throttled on
   * (`LAMBDACABLE_FANOUT_RETRY_BUDGET_MS`): a large audience may meet the account's
   * `@connections` quota, and waits its turn. (A stream delivered inline keeps 3 s: its next
   * frame waits for it.)
   * @default 20000
   */
  readonly fanoutRetryBudgetMs: number;
  /**
   * Subscribers per shard before a stream's new subscriptions are spread over more partition
   * keys (`LAMBDACABLE_STREAM_SHARD_TARGET`).
   * @default 10000
   */
  readonly streamShardTarget: number;
  /**
   * The broker behind the broadcast consumer (`LAMBDACABLE_BROKER`): `dynamodb` keeps stream
   * history (epoch and offset in every frame, `history` requests answered); `legacy` is
   * AnyCable's broker-less mode: frames go straight to the fan-out without epoch or offset,
   * nothing is written to the history table, and `history` requests are rejected. Sessions
   * are restored either way: they live in the session cache, not in the broker.
   * @default 'dynamodb'
   */
  readonly brokerAdapter: BrokerAdapter;
  /**
   * Seconds an ack item of a consumer group outlives its last write (`LAMBDACABLE_ACK_TTL`):
   * the `acks` table's `expiresAt`. Longer than a hole is kept (28 days).
   * @default 2592000 (30 days)
   */
  readonly ackTtl: number;
  /**
   * Seconds `POST /_broadcast` remembers an `Idempotency-Key` (`LAMBDACABLE_IDEMPOTENCY_TTL`):
   * a repeat within it gets the first answer and writes nothing.
   * @default 3600 (1 hour)
   */
  readonly idempotencyTtl: number;
  /**
   * Seconds a stream's meta item (epoch, last offset) outlives its last append
   * (`LAMBDACABLE_STREAM_META_TTL`); at least the history TTL. An expired stream starts
   * over with a new epoch at offset 1.
   * @default 86400 (1 day)
   */
  readonly streamMetaTtl: number;
  /**
   * History and session limits (`LAMBDACABLE_HISTORY_LIMIT`, `LAMBDACABLE_HISTORY_TTL`,
   * `LAMBDACABLE_SESSIONS_TTL`).
   * @default {@link defaultBrokerConfig}
   */
  readonly broker: BrokerConfig;
}

/** The brokers `LAMBDACABLE_BROKER` selects. */
export const BROKER_ADAPTERS = ['dynamodb', 'legacy'] as const;

/** A broker {@link GatewayConfig.brokerAdapter} can name. */
export type BrokerAdapter = (typeof BROKER_ADAPTERS)[number];

/** Public stream names start with this unless `LAMBDACABLE_PUBLIC_STREAM_PREFIX` says otherwise. */
export const DEFAULT_PUBLIC_STREAM_PREFIX = 'public:';

/** Subscriptions per connection unless `LAMBDACABLE_MAX_SUBSCRIPTIONS` says otherwise. */
export const DEFAULT_MAX_SUBSCRIPTIONS = 128;

/** The defaults of every setting. */
export function defaultGatewayConfig(): GatewayConfig {
  return {
    pingInterval: 3,
    pingerTick: 250,
    pingerPartitionRate: 200,
    jwtClockSkew: 30,
    publicStreams: false,
    publicStreamPrefix: DEFAULT_PUBLIC_STREAM_PREFIX,
    maxSubscriptions: DEFAULT_MAX_SUBSCRIPTIONS,
    allowAnonymous: false,
    whisperOnSigned: false,
    maxFrameBytes: 32768,
    rateLimit: 10,
    rateBurst: 50,
    presenceTtl: DEFAULT_PRESENCE_TTL_SECONDS,
    postRetryPasses: DEFAULT_RETRY_PASSES,
    postRetryBackoffMs: DEFAULT_RETRY_BACKOFF_MS,
    fanoutTaskSize: 500,
    fanoutRetryBudgetMs: 20_000,
    streamShardTarget: 10_000,
    brokerAdapter: 'dynamodb',
    ackTtl: DEFAULT_ACK_TTL_SECONDS,
    idempotencyTtl: 3600,
    streamMetaTtl: DEFAULT_STREAM_META_TTL,
    broker: defaultBrokerConfig(),
  };
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads the gateway settings from an environment. Pure: the composition root hands in
 * the process environment. Unset or empty variables take their default; an invalid value
 * throws {@link ConfigError} naming the variable and what was expected.
 */
export function configFromEnv(env: Env): GatewayConfig {
  const d = defaultGatewayConfig();
  const secrets = {
    jwtSecret: key(env, 'LAMBDACABLE_JWT_SECRET'),
    jwtPreviousSecret: key(env, 'LAMBDACABLE_JWT_SECRET_PREVIOUS'),
    streamsSecret: key(env, 'LAMBDACABLE_STREAMS_SECRET'),
    streamsPreviousSecret: key(env, 'LAMBDACABLE_STREAMS_SECRET_PREVIOUS'),
    broadcastKey: key(env, 'LAMBDACABLE_BROADCAST_KEY'),
    broadcastPreviousKey: key(env, 'LAMBDACABLE_BROADCAST_KEY_PREVIOUS'),
    jwtIssuer: text(env, 'LAMBDACABLE_JWT_ISSUER'),
    jwtAudience: text(env, 'LAMBDACABLE_JWT_AUDIENCE'),
  };
  return {
    pingInterval: positive(env, 'LAMBDACABLE_PING_INTERVAL', d.pingInterval, false),
    pingerTick: positive(env, 'LAMBDACABLE_PINGER_TICK_MS', d.pingerTick, true),
    pingerPartitionRate: positive(
      env,
      'LAMBDACABLE_PINGER_PARTITION_RATE',
      d.pingerPartitionRate,
      false,
    ),
    jwtClockSkew: nonNegative(env, 'LAMBDACABLE_JWT_CLOCK_SKEW', d.jwtClockSkew),
    ...(text(env, 'LAMBDACABLE_JWT_MAX_AGE') === undefined
      ? {}
      : { jwtMaxAge: positive(env, 'LAMBDACABLE_JWT_MAX_AGE', 0, true) }),
    ...(Object.fromEntries(Object.entries(secrets).filter(([, v]) => v !== undefined)) as Partial<
      typeof secrets
    >),
    publicStreams: flag(env, 'LAMBDACABLE_PUBLIC_STREAMS', d.publicStreams),
    // Unset: the default prefix; set to '' (not unset): any name, as AnyCable.
    publicStreamPrefix: env.LAMBDACABLE_PUBLIC_STREAM_PREFIX ?? d.publicStreamPrefix,
    maxSubscriptions: positive(env, 'LAMBDACABLE_MAX_SUBSCRIPTIONS', d.maxSubscriptions, true),
    allowAnonymous: flag(env, 'LAMBDACABLE_ALLOW_ANONYMOUS', d.allowAnonymous),
    whisperOnSigned: flag(env, 'LAMBDACABLE_WHISPER_ON_SIGNED', d.whisperOnSigned),
    maxFrameBytes: positive(env, 'LAMBDACABLE_MAX_FRAME_BYTES', d.maxFrameBytes, true),
    rateLimit: atLeastZero(
      env,
      'LAMBDACABLE_RATE_LIMIT',
      d.rateLimit,
      'a number of tokens per second (0: no limit)',
      Number.isFinite,
    ),
    rateBurst: positive(env, 'LAMBDACABLE_RATE_BURST', d.rateBurst, true),
    presenceTtl: positive(env, 'LAMBDACABLE_PRESENCE_TTL', d.presenceTtl, true),
    postRetryPasses: count(env, 'LAMBDACABLE_POST_RETRY_PASSES', d.postRetryPasses),
    postRetryBackoffMs: count(env, 'LAMBDACABLE_POST_RETRY_BACKOFF_MS', d.postRetryBackoffMs),
    fanoutTaskSize: positive(env, 'LAMBDACABLE_FANOUT_TASK_SIZE', d.fanoutTaskSize, true),
    fanoutRetryBudgetMs: count(env, 'LAMBDACABLE_FANOUT_RETRY_BUDGET_MS', d.fanoutRetryBudgetMs),
    streamShardTarget: positive(env, 'LAMBDACABLE_STREAM_SHARD_TARGET', d.streamShardTarget, true),
    brokerAdapter: oneOf(env, 'LAMBDACABLE_BROKER', BROKER_ADAPTERS, d.brokerAdapter),
    ackTtl: positive(env, 'LAMBDACABLE_ACK_TTL', d.ackTtl, true),
    idempotencyTtl: positive(env, 'LAMBDACABLE_IDEMPOTENCY_TTL', d.idempotencyTtl, true),
    streamMetaTtl: positive(env, 'LAMBDACABLE_STREAM_META_TTL', d.streamMetaTtl, true),
    broker: {
      historyLimit: positive(env, 'LAMBDACABLE_HISTORY_LIMIT', d.broker.historyLimit, true),
      historyTtl: positive(env, 'LAMBDACABLE_HISTORY_TTL', d.broker.historyTtl, false),
      sessionsTtl: positive(env, 'LAMBDACABLE_SESSIONS_TTL', d.broker.sessionsTtl, false),
    },
  };
}

/** The fewest bytes a secret key may have: 256 bits, HS256's own key size. */
export const MIN_SECRET_BYTES = 32;

/** A secret key: unset, or at least {@link MIN_SECRET_BYTES} bytes (never shown in the error). */
function key(env: Env, name: string): string | undefined {
  const value = text(env, name);
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

function text(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function flag(env: Env, name: string, fallback: boolean): boolean {
  const value = text(env, name)?.trim().toLowerCase();
  if (value === undefined) return fallback;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new ConfigError(`${name} must be true or false, got: ${env[name]}`, { variable: name });
}

function oneOf<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const value = text(env, name)?.trim().toLowerCase();
  if (value === undefined) return fallback;
  if ((values as readonly string[]).includes(value)) return value as T;
  throw new ConfigError(`${name} must be one of ${values.join(', ')}, got: ${env[name]}`, {
    variable: name,
  });
}

function positive(env: Env, name: string, fallback: number, integer: boolean): number {
  const value = text(env, name)?.trim();
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new ConfigError(
      `${name} must be a positive ${integer ? 'integer' : 'number'}, got: ${env[name]}`,
      { variable: name },
    );
  }
  return n;
}

function nonNegative(env: Env, name: string, fallback: number): number {
  return atLeastZero(env, name, fallback, 'a number of seconds', Number.isFinite);
}

function count(env: Env, name: string, fallback: number): number {
  return atLeastZero(env, name, fallback, 'an integer', Number.isInteger);
}

function atLeastZero(
  env: Env,
  name: string,
  fallback: number,
  what: string,
  valid: (n: number) => boolean,
): number {
  const value = text(env, name)?.trim();
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!valid(n) || n < 0) {
    throw new ConfigError(`${name} must be ${what} >= 0, got: ${env[name]}`, { variable: name });
  }
  return n;
}
