import { type Env, envPositive } from '../../kernel/env.js';

/** The HTTP broadcast API's settings (its key is in the auth room's). */
export interface BroadcastsConfig {
  /**
   * Seconds `POST /_broadcast` remembers an `Idempotency-Key` (`LAMBDACABLE_IDEMPOTENCY_TTL`):
   * a repeat within it gets the first answer and writes nothing.
   * @default 3600 (1 hour)
   */
  readonly idempotencyTtl: number;
}

/** The defaults of {@link BroadcastsConfig}. */
export function defaultBroadcastsConfig(): BroadcastsConfig {
  return { idempotencyTtl: 3600 };
}

/** Reads {@link BroadcastsConfig} from an environment. */
export function broadcastsConfigFromEnv(env: Env): BroadcastsConfig {
  const d = defaultBroadcastsConfig();
  return {
    idempotencyTtl: envPositive(env, 'LAMBDACABLE_IDEMPOTENCY_TTL', d.idempotencyTtl, true),
  };
}
