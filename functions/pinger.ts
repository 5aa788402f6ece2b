import type { Context } from 'aws-lambda';
import { errorMessage } from '../lib/core';
import { realtime, runtime } from './runtime';

/** The schedule's period: one run covers one minute. */
const RUN_MS = 60_000;
/** A run outlasts the next one's start by this much, so that no connection waits for a ping. */
const OVERLAP_MS = 2_000;
/** Time left for the last tick before the Lambda's timeout: no welcome or ping starts in it. */
const MARGIN_MS = 5_000;

/**
 * Scheduled every minute, it runs for a minute: it welcomes new connections and pings each
 * connection every `pi` seconds (`LAMBDACABLE_PING_INTERVAL` by default), reading every
 * connection once and then, every `LAMBDACABLE_PINGER_TICK_MS`, only what changed.
 */
export const handler = async (_event: unknown, context: Context) => {
  const { config, logger } = runtime();
  const pinger = realtime().pinger({ defaultInterval: config.pingInterval, logger });
  const stopAt = Date.now() + context.getRemainingTimeInMillis() - MARGIN_MS;
  const until = Math.min(Date.now() + RUN_MS + OVERLAP_MS, stopAt);
  while (Date.now() < until) {
    const started = Date.now();
    try {
      // The first tick reads everything; a failed tick is logged and the next one tries again,
      // so that one throttled read never stops the welcomes and pings of the whole run.
      await pinger.tick(stopAt);
    } catch (error) {
      logger.error('pinger tick failed', {
        error: errorMessage(error),
      });
    }
    // A slow tick is followed by the next one at once, never by a burst of catch-up ticks.
    const wait = started + config.pingerTick - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const report = pinger.report();
  logger.info('pinger run', { ...report });
  return report;
};
