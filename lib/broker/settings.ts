import { type Env, envOneOf, envPositive } from '../kernel/env.js';
import { type BrokerConfig, DEFAULT_STREAM_META_TTL, defaultBrokerConfig } from './types.js';

/** The brokers `LAMBDACABLE_BROKER` selects. */
export const BROKER_ADAPTERS = ['dynamodb', 'legacy'] as const;

/** A broker {@link BrokerAdapterConfig.brokerAdapter} can name. */
export type BrokerAdapter = (typeof BROKER_ADAPTERS)[number];

/** Which broker runs, and its limits. */
export interface BrokerAdapterConfig {
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

/** The defaults of {@link BrokerAdapterConfig}. */
export function defaultBrokerAdapterConfig(): BrokerAdapterConfig {
  return {
    brokerAdapter: 'dynamodb',
    streamMetaTtl: DEFAULT_STREAM_META_TTL,
    broker: defaultBrokerConfig(),
  };
}

/** Reads {@link BrokerAdapterConfig} from an environment. */
export function brokerAdapterConfigFromEnv(env: Env): BrokerAdapterConfig {
  const d = defaultBrokerAdapterConfig();
  return {
    brokerAdapter: envOneOf(env, 'LAMBDACABLE_BROKER', BROKER_ADAPTERS, d.brokerAdapter),
    streamMetaTtl: envPositive(env, 'LAMBDACABLE_STREAM_META_TTL', d.streamMetaTtl, true),
    broker: {
      historyLimit: envPositive(env, 'LAMBDACABLE_HISTORY_LIMIT', d.broker.historyLimit, true),
      historyTtl: envPositive(env, 'LAMBDACABLE_HISTORY_TTL', d.broker.historyTtl, false),
      sessionsTtl: envPositive(env, 'LAMBDACABLE_SESSIONS_TTL', d.broker.sessionsTtl, false),
    },
  };
}
