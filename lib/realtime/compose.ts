import type { Broadcaster, Broker, HistoryReader, SessionCache } from '../broker/types.js';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { GatewayConfig } from './config.js';
import type { ConnectionApi } from './connection-api.js';
import type { ConnectionStore } from './connections.js';
import { Fanout, type FanoutOptions } from './fanout.js';
import { Gateway } from './gateway.js';
import { Pinger, type PingerOptions } from './pinger.js';

/** Options of {@link composeRealtime}. */
export interface ComposeRealtimeOptions {
  /** Connections and subscriptions. */
  readonly store: ConnectionStore;
  /** Posts frames to connections (the API Gateway management API). */
  readonly api: ConnectionApi;
  /**
   * Where sessions live. The gateway writes them, the fan-out finishes the sessions of gone
   * connections; the broker is handed the same cache, so that it keeps its sessions there too.
   */
  readonly sessions: SessionCache;
  readonly config: GatewayConfig;
  /** History reads of the gateway (replay) and the pinger (activity). @default the broker */
  readonly history?: HistoryReader;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
  /** @default the system clock */
  readonly clock?: Clock;
  /** New session ids. @default `crypto.randomUUID` */
  readonly newSid?: () => string;
  /** Posts in flight at once, in a fan-out and in a pinger tick. @default 50 */
  readonly concurrency?: number;
  /** Subscribers read per page of a fan-out. @default 1000 */
  readonly pageSize?: number;
  /** A connection younger than this (ms) is not disconnected on a 410. @default 10000 */
  readonly goneGraceMs?: number;
  /** Later passes over failed posts ({@link FanoutOptions.retryPasses}). @default 5 */
  readonly retryPasses?: number;
  /** Wait before the first later pass, ms ({@link FanoutOptions.retryBackoffMs}). @default 100 */
  readonly retryBackoffMs?: number;
  /** Time the later passes of one delivery may take, ms. @default 3000 */
  readonly retryBudgetMs?: number;
  /** How long a connection given up on gets no later passes, ms. @default 60000 */
  readonly stuckMs?: number;
}

/** A pinger's own settings; the rest comes from {@link composeRealtime}'s parts. */
export type PingerSettings = Omit<
  PingerOptions,
  'store' | 'api' | 'welcomer' | 'sessions' | 'history'
>;

/** The delivery path: the fan-out, and the broker that feeds it. */
export interface Delivery<B extends Broker> {
  /** The broker's broadcaster: posts to each stream's subscribers. */
  readonly fanout: Fanout;
  /** The broker, built over the fan-out. */
  readonly broker: B;
}

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
  const { fanout, broker: built } = composeDelivery(options, broker);
  const history = options.history ?? built;
  const gateway = new Gateway({
    store,
    sessions,
    history,
    fanout,
    api,
    config,
    logger,
    clock,
    newSid: options.newSid,
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
    });
  return { fanout, broker: built, gateway, pinger };
}

/**
 * The first stage of {@link composeRealtime}, on its own for the broadcast consumer, which
 * needs no gateway: the fan-out, then the broker over it. A bundle that calls only this
 * leaves the gateway, its tokens and the pinger out.
 */
export function composeDelivery<B extends Broker>(
  options: Omit<ComposeRealtimeOptions, 'config' | 'history' | 'newSid'>,
  broker: (broadcaster: Broadcaster, sessions: SessionCache) => B,
): Delivery<B> {
  const { store, api, sessions, logger, clock, concurrency, goneGraceMs } = options;
  const fanout = new Fanout({
    store,
    api,
    sessions,
    logger,
    clock,
    concurrency,
    pageSize: options.pageSize,
    goneGraceMs,
    retryPasses: options.retryPasses,
    retryBackoffMs: options.retryBackoffMs,
    retryBudgetMs: options.retryBudgetMs,
    stuckMs: options.stuckMs,
  });
  return { fanout, broker: broker(fanout, sessions) };
}
