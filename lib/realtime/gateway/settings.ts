import { type Env, envFlag, envPositive } from '../../kernel/env.js';

/** What the gateway lets a connection's commands do. */
export interface CommandsConfig {
  /**
   * The most subscriptions one connection may hold (`LAMBDACABLE_MAX_SUBSCRIPTIONS`); one
   * more is refused with `reject_subscription`.
   * @default 128
   */
  readonly maxSubscriptions: number;
  /**
   * Whether whispers are allowed on signed streams (`LAMBDACABLE_WHISPER_ON_SIGNED`); public
   * streams always allow them.
   * @default false
   */
  readonly whisperOnSigned: boolean;
}

/** Subscriptions per connection unless `LAMBDACABLE_MAX_SUBSCRIPTIONS` says otherwise. */
export const DEFAULT_MAX_SUBSCRIPTIONS = 128;

/** The defaults of {@link CommandsConfig}. */
export function defaultCommandsConfig(): CommandsConfig {
  return { maxSubscriptions: DEFAULT_MAX_SUBSCRIPTIONS, whisperOnSigned: false };
}

/** Reads {@link CommandsConfig} from an environment. */
export function commandsConfigFromEnv(env: Env): CommandsConfig {
  const d = defaultCommandsConfig();
  return {
    maxSubscriptions: envPositive(env, 'LAMBDACABLE_MAX_SUBSCRIPTIONS', d.maxSubscriptions, true),
    whisperOnSigned: envFlag(env, 'LAMBDACABLE_WHISPER_ON_SIGNED', d.whisperOnSigned),
  };
}
