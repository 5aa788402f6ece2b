import { type Env, envPositive } from '../../kernel/env.js';
import type { PresenceStore } from './ports.js';

/** Presence's setting read from the environment. */
export interface PresenceConfig {
  /** Seconds a connection that drops without leaving stays present (`LAMBDACABLE_PRESENCE_TTL`). @default 15 */
  readonly presenceTtl: number;
}

/** Seconds a dropped connection stays present (`LAMBDACABLE_PRESENCE_TTL`). @default 15 */
export const DEFAULT_PRESENCE_TTL_SECONDS = 15;

/** The records an `info` reply lists at most, by default. */
export const DEFAULT_PRESENCE_INFO_LIMIT = 100;

/** The defaults of {@link PresenceConfig}. */
export function defaultPresenceConfig(): PresenceConfig {
  return { presenceTtl: DEFAULT_PRESENCE_TTL_SECONDS };
}

/** Reads {@link PresenceConfig} from an environment. */
export function presenceConfigFromEnv(env: Env): PresenceConfig {
  const d = defaultPresenceConfig();
  return { presenceTtl: envPositive(env, 'LAMBDACABLE_PRESENCE_TTL', d.presenceTtl, true) };
}

/** Presence, as the gateway runs it. */
export interface PresenceSettings {
  readonly store: PresenceStore;
  /** How long (ms) a connection that drops without leaving stays present (`LAMBDACABLE_PRESENCE_TTL`). */
  readonly ttlMs: number;
  /**
   * The most `records` an `info` reply lists (`total` counts every member). @default 100
   */
  readonly infoLimit?: number;
}
