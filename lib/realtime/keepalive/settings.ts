import { type Env, envPositive } from '../../kernel/env.js';

/** How often connections are pinged, and how the pinger spreads the work. */
export interface KeepaliveConfig {
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
}

/** The defaults of {@link KeepaliveConfig}. */
export function defaultKeepaliveConfig(): KeepaliveConfig {
  return { pingInterval: 3, pingerTick: 250, pingerPartitionRate: 200 };
}

/** Reads {@link KeepaliveConfig} from an environment. */
export function keepaliveConfigFromEnv(env: Env): KeepaliveConfig {
  const d = defaultKeepaliveConfig();
  return {
    pingInterval: envPositive(env, 'LAMBDACABLE_PING_INTERVAL', d.pingInterval, false),
    pingerTick: envPositive(env, 'LAMBDACABLE_PINGER_TICK_MS', d.pingerTick, true),
    pingerPartitionRate: envPositive(
      env,
      'LAMBDACABLE_PINGER_PARTITION_RATE',
      d.pingerPartitionRate,
      false,
    ),
  };
}
