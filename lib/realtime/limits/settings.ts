import { type Env, envAtLeastZero, envPositive } from '../../kernel/env.js';

/** What one connection may send: frame size and rate. */
export interface LimitsConfig {
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
}

/** The defaults of {@link LimitsConfig}. */
export function defaultLimitsConfig(): LimitsConfig {
  return { maxFrameBytes: 32768, rateLimit: 10, rateBurst: 50 };
}

/** Reads {@link LimitsConfig} from an environment. */
export function limitsConfigFromEnv(env: Env): LimitsConfig {
  const d = defaultLimitsConfig();
  return {
    maxFrameBytes: envPositive(env, 'LAMBDACABLE_MAX_FRAME_BYTES', d.maxFrameBytes, true),
    rateLimit: envAtLeastZero(
      env,
      'LAMBDACABLE_RATE_LIMIT',
      d.rateLimit,
      'a number of tokens per second (0: no limit)',
      Number.isFinite,
    ),
    rateBurst: envPositive(env, 'LAMBDACABLE_RATE_BURST', d.rateBurst, true),
  };
}
