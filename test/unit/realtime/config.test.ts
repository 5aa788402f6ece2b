import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  configFromEnv,
  defaultBrokerConfig,
  defaultGatewayConfig,
} from '../../../lib/core';

describe('configFromEnv', () => {
  it('uses the documented defaults for an empty environment', () => {
    expect(configFromEnv({})).toEqual(defaultGatewayConfig());
    expect(defaultGatewayConfig()).toMatchObject({
      pingInterval: 3,
      pingerTick: 250,
      pingerPartitionRate: 200,
      publicStreams: false,
      allowAnonymous: false,
      whisperOnSigned: false,
      maxFrameBytes: 32768,
      rateLimit: 10,
      rateBurst: 50,
      presenceTtl: 15,
      broker: defaultBrokerConfig(),
    });
  });

  it('reads every variable, empty ones meaning unset', () => {
    const config = configFromEnv({
      LAMBDACABLE_PING_INTERVAL: '5',
      LAMBDACABLE_PINGER_TICK_MS: '500',
      LAMBDACABLE_PINGER_PARTITION_RATE: '50.5',
      LAMBDACABLE_JWT_SECRET: 'j'.repeat(32),
      LAMBDACABLE_JWT_SECRET_PREVIOUS: '0'.repeat(32),
      LAMBDACABLE_JWT_MAX_AGE: '3600',
      LAMBDACABLE_STREAMS_SECRET: 's'.repeat(32),
      LAMBDACABLE_STREAMS_SECRET_PREVIOUS: '1'.repeat(32),
      LAMBDACABLE_BROADCAST_KEY: '',
      LAMBDACABLE_BROADCAST_KEY_PREVIOUS: '2'.repeat(32),
      LAMBDACABLE_PUBLIC_STREAMS: 'true',
      LAMBDACABLE_PUBLIC_STREAM_PREFIX: 'open/',
      LAMBDACABLE_MAX_SUBSCRIPTIONS: '16',
      LAMBDACABLE_ALLOW_ANONYMOUS: 'TRUE',
      LAMBDACABLE_WHISPER_ON_SIGNED: '1',
      LAMBDACABLE_MAX_FRAME_BYTES: '1024',
      LAMBDACABLE_RATE_LIMIT: '2.5',
      LAMBDACABLE_RATE_BURST: '20',
      LAMBDACABLE_PRESENCE_TTL: '30',
      LAMBDACABLE_POST_RETRY_PASSES: '0',
      LAMBDACABLE_POST_RETRY_BACKOFF_MS: '25',
      LAMBDACABLE_FANOUT_TASK_SIZE: '200',
      LAMBDACABLE_FANOUT_RETRY_BUDGET_MS: '0',
      LAMBDACABLE_STREAM_SHARD_TARGET: '',
      LAMBDACABLE_BROKER: 'Legacy',
      LAMBDACABLE_HISTORY_LIMIT: '10',
      LAMBDACABLE_HISTORY_TTL: '60',
      LAMBDACABLE_SESSIONS_TTL: '120',
      LAMBDACABLE_ACK_TTL: '86400',
      LAMBDACABLE_STREAM_META_TTL: '',
    });
    expect(config).toEqual({
      pingInterval: 5,
      pingerTick: 500,
      pingerPartitionRate: 50.5,
      jwtClockSkew: 30,
      jwtMaxAge: 3600,
      jwtSecret: 'j'.repeat(32),
      jwtPreviousSecret: '0'.repeat(32),
      streamsSecret: 's'.repeat(32),
      streamsPreviousSecret: '1'.repeat(32),
      broadcastPreviousKey: '2'.repeat(32),
      publicStreams: true,
      publicStreamPrefix: 'open/',
      maxSubscriptions: 16,
      allowAnonymous: true,
      whisperOnSigned: true,
      maxFrameBytes: 1024,
      rateLimit: 2.5,
      rateBurst: 20,
      presenceTtl: 30,
      postRetryPasses: 0,
      postRetryBackoffMs: 25,
      fanoutTaskSize: 200,
      fanoutRetryBudgetMs: 0,
      idempotencyTtl: 3600,
      streamShardTarget: 10_000,
      brokerAdapter: 'legacy',
      ackTtl: 86_400,
      streamMetaTtl: 86_400,
      broker: { historyLimit: 10, historyTtl: 60, sessionsTtl: 120 },
    });
  });

  it.each([
    ['LAMBDACABLE_PING_INTERVAL', 'soon'],
    ['LAMBDACABLE_PING_INTERVAL', '0'],
    ['LAMBDACABLE_PINGER_TICK_MS', '0.5'],
    ['LAMBDACABLE_PINGER_PARTITION_RATE', '0'],
    ['LAMBDACABLE_PINGER_PARTITION_RATE', 'many'],
    ['LAMBDACABLE_PUBLIC_STREAMS', 'yes'],
    ['LAMBDACABLE_MAX_FRAME_BYTES', '1.5'],
    ['LAMBDACABLE_RATE_LIMIT', '-1'],
    ['LAMBDACABLE_RATE_LIMIT', 'fast'],
    ['LAMBDACABLE_RATE_BURST', '0'],
    ['LAMBDACABLE_RATE_BURST', '2.5'],
    ['LAMBDACABLE_PRESENCE_TTL', '0'],
    ['LAMBDACABLE_PRESENCE_TTL', '1.5'],
    ['LAMBDACABLE_POST_RETRY_PASSES', '-1'],
    ['LAMBDACABLE_POST_RETRY_BACKOFF_MS', '0.5'],
    ['LAMBDACABLE_FANOUT_TASK_SIZE', '0'],
    ['LAMBDACABLE_FANOUT_RETRY_BUDGET_MS', 'long'],
    ['LAMBDACABLE_STREAM_SHARD_TARGET', '2.5'],
    ['LAMBDACABLE_BROKER', 'redis'],
    ['LAMBDACABLE_HISTORY_LIMIT', '-1'],
    ['LAMBDACABLE_ACK_TTL', '0'],
    ['LAMBDACABLE_STREAM_META_TTL', '1.5'],
    ['LAMBDACABLE_JWT_MAX_AGE', '0'],
    ['LAMBDACABLE_JWT_MAX_AGE', 'a day'],
    ['LAMBDACABLE_MAX_SUBSCRIPTIONS', '0'],
    ['LAMBDACABLE_MAX_SUBSCRIPTIONS', '1.5'],
    // Over the outbox's 2-day row retention: a retry could no longer find what was written.
    ['LAMBDACABLE_IDEMPOTENCY_TTL', '172801'],
  ])('throws a ConfigError naming %s=%s', (variable, value) => {
    const error = (() => {
      try {
        configFromEnv({ [variable]: value });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as Error).message).toContain(value);
  });

  it.each([
    ['LAMBDACABLE_JWT_SECRET', '31-bytes-is-one-byte-too-short!'],
    ['LAMBDACABLE_JWT_SECRET_PREVIOUS', 'short-key'],
    ['LAMBDACABLE_STREAMS_SECRET', 'x'.repeat(31)],
    ['LAMBDACABLE_STREAMS_SECRET_PREVIOUS', 'short-key'],
    ['LAMBDACABLE_BROADCAST_KEY', 'short-key'],
    ['LAMBDACABLE_BROADCAST_KEY_PREVIOUS', 'short-key'],
  ])('refuses %s under 32 bytes, naming it and its size but never its value', (variable, value) => {
    let error: unknown;
    try {
      configFromEnv({ [variable]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as Error).message).toContain(`${variable} is ${value.length} bytes`);
    expect((error as Error).message).not.toContain(value);
    // 32 bytes is enough.
    expect(() => configFromEnv({ [variable]: 'k'.repeat(32) })).not.toThrow();
  });
});
