import { type Env, envPositive } from '../../kernel/env.js';
import { OUTBOX_RETENTION_SECONDS } from '../../kernel/limits.js';

/** The HTTP broadcast API's settings (its key is in the auth room's). */
export interface BroadcastsConfig {
  /**
   * Seconds `POST /_broadcast` remembers an `Idempotency-Key` (`LAMBDACABLE_IDEMPOTENCY_TTL`):
   * a repeat within it gets the first answer and writes nothing, and a retry of a failed
   * request within it of the first attempt writes only what that attempt did not. At most
   * the outbox's row retention ({@link OUTBOX_RETENTION_SECONDS}, 2 days): a retry finds
   * what was written by those rows.
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
    // At most the outbox's row retention: a retry finds what its first attempt wrote there.
    idempotencyTtl: envPositive(
      env,
      'LAMBDACABLE_IDEMPOTENCY_TTL',
      d.idempotencyTtl,
      true,
      OUTBOX_RETENTION_SECONDS,
    ),
  };
}
