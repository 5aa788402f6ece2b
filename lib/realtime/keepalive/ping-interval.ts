import type { Refusal } from '../protocol.js';

/** Smallest and largest ping interval a client may ask for with `pi` (seconds). */
export const MIN_PING_INTERVAL = 1;
/** Under API Gateway's 10-minute idle timeout, which a ping resets. */
export const MAX_PING_INTERVAL = 540;

/** Why a `pi` query parameter is refused: not digits only, or outside the allowed range. */
export type PingIntervalRefusalReason = 'not_integer' | 'out_of_range';

/** The ping interval a client asked for (`undefined` when it asked for none), or why it is refused. */
export type PingIntervalChoice =
  | { readonly ok: true; readonly seconds: number | undefined }
  | { readonly ok: false; readonly refusal: Refusal<PingIntervalRefusalReason> };

/**
 * The ping interval (seconds) of a `pi` query parameter: an integer from
 * {@link MIN_PING_INTERVAL} to {@link MAX_PING_INTERVAL}; absent or empty, none.
 */
export function readPingInterval(pi: string | undefined): PingIntervalChoice {
  if (pi === undefined || pi === '') return { ok: true, seconds: undefined };
  const value = Number(pi);
  const integer = /^\d+$/.test(pi);
  if (!integer || value < MIN_PING_INTERVAL || value > MAX_PING_INTERVAL) {
    const reason = integer ? 'out_of_range' : 'not_integer';
    const message = `pi must be an integer number of seconds from ${MIN_PING_INTERVAL} to ${MAX_PING_INTERVAL}, got: ${JSON.stringify(pi)}`;
    return { ok: false, refusal: { reason, message } };
  }
  return { ok: true, seconds: value };
}

/**
 * {@link readPingInterval} as it was first published: the seconds, the refusal's message
 * (a string), or `undefined` when absent.
 */
export function parsePingInterval(pi: string | undefined): number | string | undefined {
  const choice = readPingInterval(pi);
  return choice.ok ? choice.seconds : choice.refusal.message;
}
