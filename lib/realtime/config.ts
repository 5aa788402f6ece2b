import {
  type BrokerAdapterConfig,
  brokerAdapterConfigFromEnv,
  defaultBrokerAdapterConfig,
} from '../broker/settings.js';
import type { Env } from '../kernel/env.js';
import { type AckConfig, ackConfigFromEnv, defaultAckConfig } from '../messaging/settings.js';
import { type AuthConfig, authConfigFromEnv, defaultAuthConfig } from './auth/settings.js';
import {
  type BroadcastsConfig,
  broadcastsConfigFromEnv,
  defaultBroadcastsConfig,
} from './broadcasts/settings.js';
import { defaultFanoutConfig, type FanoutConfig, fanoutConfigFromEnv } from './fanout/settings.js';
import {
  type CommandsConfig,
  commandsConfigFromEnv,
  defaultCommandsConfig,
} from './gateway/settings.js';
import {
  defaultKeepaliveConfig,
  type KeepaliveConfig,
  keepaliveConfigFromEnv,
} from './keepalive/settings.js';
import { defaultLimitsConfig, type LimitsConfig, limitsConfigFromEnv } from './limits/settings.js';
import {
  defaultPresenceConfig,
  type PresenceConfig,
  presenceConfigFromEnv,
} from './presence/settings.js';

/**
 * Every setting of a stage, read once at start ({@link configFromEnv}): the rooms' settings
 * side by side. Each field is documented, with its variable and default, in its room's
 * `settings.ts`.
 */
export interface GatewayConfig
  extends AuthConfig,
    CommandsConfig,
    LimitsConfig,
    KeepaliveConfig,
    PresenceConfig,
    FanoutConfig,
    BroadcastsConfig,
    BrokerAdapterConfig,
    AckConfig {}

/** The defaults of every setting. */
export function defaultGatewayConfig(): GatewayConfig {
  return {
    ...defaultAuthConfig(),
    ...defaultCommandsConfig(),
    ...defaultLimitsConfig(),
    ...defaultKeepaliveConfig(),
    ...defaultPresenceConfig(),
    ...defaultFanoutConfig(),
    ...defaultBroadcastsConfig(),
    ...defaultBrokerAdapterConfig(),
    ...defaultAckConfig(),
  };
}

/**
 * Reads every setting from an environment. Pure: the composition root hands in the process
 * environment. Unset or empty variables take their default; an invalid value throws
 * `ConfigError` naming the variable and what was expected.
 */
export function configFromEnv(env: Env): GatewayConfig {
  return {
    ...authConfigFromEnv(env),
    ...commandsConfigFromEnv(env),
    ...limitsConfigFromEnv(env),
    ...keepaliveConfigFromEnv(env),
    ...presenceConfigFromEnv(env),
    ...fanoutConfigFromEnv(env),
    ...broadcastsConfigFromEnv(env),
    ...brokerAdapterConfigFromEnv(env),
    ...ackConfigFromEnv(env),
  };
}
