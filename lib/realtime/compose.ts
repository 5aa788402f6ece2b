import type { Broadcaster, Broker, HistoryReader, SessionCache } from '../broker/types.js';
import type { GatewayConfig } from './config.js';
import { type ComposeDeliveryOptions, composeDelivery, type Delivery } from './fanout/delivery.js';
import { Gateway } from './gateway/gateway.js';
import { Pinger, type PingerOptions } from './keepalive/pinger.js';
import type { RateLimiter } from './limits/ports.js';

/** Options of {@link composeRealtime}: the delivery path's, and the gateway's. */
export interface ComposeRealtimeOptions extends ComposeDeliveryOptions {
  readonly config: GatewayConfig;
  /** History reads of the gateway (replay) and the pinger (activity). @default the broker */
  readonly history?: HistoryReader;
  /** New session ids. @default `crypto.randomUUID` */
  readonly newSid?: () => string;
  /** The gateway's per-connection rate limit. @default no limit */
  readonly rateLimiter?: RateLimiter;
}

/** A pinger's own settings; the rest comes from {@link composeRealtime}'s parts. */
export type PingerSettings = Omit<
  PingerOptions,
  'store' | 'api' | 'welcomer' | 'sessions' | 'history' | 'presence'
>;

/** The WebSocket side, composed. */
export interface Realtime<B extends Broker> extends Delivery<B> {
  /** The gateway: connect, welcome, frames, disconnect. */
  readonly gateway: Gateway;
  /** A pinger run (one per run: it keeps what it read) over these parts. */
  pinger(settings: PingerSettings): Pinger;
}

/**
 * Composes the WebSocket side, each part once and after what it uses: the fan-out (over the
 * store, the management API and the session cache, which ends the sessions of gone
 * connections), then the broker, given the fan-out as its {@link Broadcaster} (and the
 * session cache, to keep its sessions in), then the gateway over the session cache and the
 * broker as its history.
 *
 * Under Lambda, of the broker only `handleBroadcast` and `handleCommand` (the broadcast
 * consumer) do anything; the gateway and the pinger use just the two narrow ports, the
 * {@link SessionCache} and the {@link HistoryReader}. The broker's `subscribe` and
 * `unsubscribe` reach the fan-out's, which do nothing: no Lambda keeps local subscribers.
 */
export function composeRealtime<B extends Broker>(
  options: ComposeRealtimeOptions,
  broker: (broadcaster: Broadcaster, sessions: SessionCache) => B,
): Realtime<B> {
  const { store, api, sessions, config, logger, clock, concurrency, goneGraceMs } = options;
  const { fanout, broker: built, revocations } = composeDelivery(options, broker);
  const history = options.history ?? built;
  const gateway = new Gateway({
    store,
    sessions,
    revocations,
    history,
    fanout,
    api,
    config,
    logger,
    clock,
    newSid: options.newSid,
    rateLimiter: options.rateLimiter,
    presence: options.presence,
  });
  const pinger = (settings: PingerSettings) =>
    new Pinger({
      logger,
      clock,
      concurrency,
      goneGraceMs,
      ...settings,
      store,
      api,
      welcomer: gateway,
      sessions,
      history,
      presence: options.presence,
    });
  return { fanout, broker: built, revocations, gateway, pinger };
}
