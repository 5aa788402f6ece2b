import { type Env, envPositive } from '../kernel/env.js';
import { DEFAULT_ACK_TTL_SECONDS } from './ack-store.js';

/** How long consumer groups' ack levels are kept. */
export interface AckConfig {
  /**
   * Seconds an ack item of a consumer group outlives its last write (`LAMBDACABLE_ACK_TTL`):
   * the `acks` table's `expiresAt`. Longer than a hole is kept (28 days).
   * @default 2592000 (30 days)
   */
  readonly ackTtl: number;
}

/** The defaults of {@link AckConfig}. */
export function defaultAckConfig(): AckConfig {
  return { ackTtl: DEFAULT_ACK_TTL_SECONDS };
}

/** Reads {@link AckConfig} from an environment. */
export function ackConfigFromEnv(env: Env): AckConfig {
  return { ackTtl: envPositive(env, 'LAMBDACABLE_ACK_TTL', defaultAckConfig().ackTtl, true) };
}
