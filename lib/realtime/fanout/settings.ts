import { type Env, envCount, envPositive } from '../../kernel/env.js';

/** How a broadcast is delivered: retries, task size and shard spread. */
export interface FanoutConfig {
  /**
   * Later passes of a fan-out over the posts that failed, each for just the connections still
   * missing the frame (`LAMBDACABLE_POST_RETRY_PASSES`); 0 gives up after the first.
   * @default 5
   */
  readonly postRetryPasses: number;
  /**
   * Milliseconds before the first later pass, doubled per pass with jitter
   * (`LAMBDACABLE_POST_RETRY_BACKOFF_MS`).
   * @default 100
   */
  readonly postRetryBackoffMs: number;
  /**
   * The most subscribers one invocation posts a frame to (`LAMBDACABLE_FANOUT_TASK_SIZE`): a
   * larger audience is delivered by fan-out tasks, each an invocation of the `deliver` function.
   * @default 500
   */
  readonly fanoutTaskSize: number;
  /**
   * Milliseconds a fan-out task keeps posting again to the connections it was throttled on
   * (`LAMBDACABLE_FANOUT_RETRY_BUDGET_MS`): a large audience may meet the account's
   * `@connections` quota, and waits its turn. (A stream delivered inline keeps 3 s: its next
   * frame waits for it.)
   * @default 20000
   */
  readonly fanoutRetryBudgetMs: number;
  /**
   * Subscribers per shard before a stream's new subscriptions are spread over more partition
   * keys (`LAMBDACABLE_STREAM_SHARD_TARGET`).
   * @default 10000
   */
  readonly streamShardTarget: number;
}

/** Later passes over throttled posts, by default. */
export const DEFAULT_RETRY_PASSES = 5;
/** The wait before the first later pass, in ms, by default. */
export const DEFAULT_RETRY_BACKOFF_MS = 100;

/** The defaults of {@link FanoutConfig}. */
export function defaultFanoutConfig(): FanoutConfig {
  return {
    postRetryPasses: DEFAULT_RETRY_PASSES,
    postRetryBackoffMs: DEFAULT_RETRY_BACKOFF_MS,
    fanoutTaskSize: 500,
    fanoutRetryBudgetMs: 20_000,
    streamShardTarget: 10_000,
  };
}

/** Reads {@link FanoutConfig} from an environment. */
export function fanoutConfigFromEnv(env: Env): FanoutConfig {
  const d = defaultFanoutConfig();
  return {
    postRetryPasses: envCount(env, 'LAMBDACABLE_POST_RETRY_PASSES', d.postRetryPasses),
    postRetryBackoffMs: envCount(env, 'LAMBDACABLE_POST_RETRY_BACKOFF_MS', d.postRetryBackoffMs),
    fanoutTaskSize: envPositive(env, 'LAMBDACABLE_FANOUT_TASK_SIZE', d.fanoutTaskSize, true),
    fanoutRetryBudgetMs: envCount(env, 'LAMBDACABLE_FANOUT_RETRY_BUDGET_MS', d.fanoutRetryBudgetMs),
    streamShardTarget: envPositive(
      env,
      'LAMBDACABLE_STREAM_SHARD_TARGET',
      d.streamShardTarget,
      true,
    ),
  };
}
