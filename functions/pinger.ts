import type { Context } from 'aws-lambda';
import { gateway, runtime } from './runtime';

/** The schedule's period: one run covers one minute. */
const RUN_MS = 60_000;

/**
 * Scheduled every minute: pings every connection each `LAMBDACABLE_PING_INTERVAL` seconds
 * for one minute, so the client's stale-connection monitor never fires between runs.
 */
export const handler = async (_event: unknown, context: Context): Promise<{ rounds: number }> => {
  const { config, logger } = runtime();
  const gw = gateway();
  const intervalMs = config.pingInterval * 1000;
  const until = Date.now() + Math.min(RUN_MS, context.getRemainingTimeInMillis() - 5_000);
  let rounds = 0;
  for (let next = Date.now(); next < until; next += intervalMs) {
    const wait = next - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await gw.pingAll();
    rounds++;
  }
  logger.debug('ping rounds', { rounds });
  return { rounds };
};
