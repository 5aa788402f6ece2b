import type { Context } from 'aws-lambda';
import { errorMessage } from '../lib/core';
import { pingerRuns, realtime, runtime } from './runtime';

/** The schedule's period: one run covers one minute. */
const RUN_MS = 60_000;
/** A run outlasts the next one's start by this much, so that no connection waits for a ping. */
const OVERLAP_MS = 2_000;
/** Time left for the last tick before the Lambda's timeout: no welcome or ping starts in it. */
const MARGIN_MS = 5_000;

/**
 * Scheduled every minute, it runs for a minute: it welcomes new connections and pings each
 * connection every `pi` seconds (`LAMBDACABLE_PING_INTERVAL` by default), reading every
 * connection of its partition once and then, every `LAMBDACABLE_PINGER_TICK_MS`, only what
 * changed. The scheduled run (no partition in its event) coordinates: it starts the runs of
 * the minute's other partitions (an asynchronous invoke of this function with
 * `{ partition, partitions, buckets }`) and runs partition 0. Each run reports what it tracks
 * after its first read and at its end, for the next minute's plan.
 */
export const handler = async (event: unknown, context: Context) => {
  const { config, logger } = runtime();
  const startedAt = Date.now();
  const runs = pingerRuns();
  const plan = await runs.begin(event);
  const pinger = realtime().pinger({
    defaultInterval: config.pingInterval,
    logger,
    scope: plan.scope,
  });
  const stopAt = Date.now() + context.getRemainingTimeInMillis() - MARGIN_MS;
  const until = Math.min(startedAt + RUN_MS + OVERLAP_MS, stopAt);
  const report = async () => {
    try {
      await runs.report(plan.run, startedAt, pinger.report());
    } catch (error) {
      logger.error('pinger report not stored', { error: errorMessage(error) });
    }
  };
  let reported = false;
  while (Date.now() < until) {
    const started = Date.now();
    try {
      // The first tick reads everything; a failed tick is logged and the next one tries again,
      // so that one throttled read never stops the welcomes and pings of the whole run.
      await pinger.tick(stopAt);
      if (!reported) {
        reported = true;
        await report();
      }
    } catch (error) {
      logger.error('pinger tick failed', {
        error: errorMessage(error),
      });
    }
    // A slow tick is followed by the next one at once, never by a burst of catch-up ticks.
    const wait = started + config.pingerTick - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  await report();
  const out = { ...plan.run, started: plan.started, notStarted: plan.failed, ...pinger.report() };
  logger.info('pinger run', out);
  return out;
};
