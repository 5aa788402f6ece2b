import { MemoryRevocationStore } from '../../adapters/memory/revocations.js';
import type { Broadcaster, Broker, SessionCache } from '../../broker/types.js';
import type { Clock } from '../../kernel/clock.js';
import type { Logger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import type { ConnectionApi, ConnectionStore } from '../ports.js';
import type { PresenceSettings } from '../presence/settings.js';
import { Fanout, type FanoutOptions } from './fanout.js';
import type { FanoutTasksOptions } from './tree.js';

/** Options of {@link composeDelivery}. */
export interface ComposeDeliveryOptions {
  /** Connections and subscriptions. */
  readonly store: ConnectionStore;
  /** Posts frames to connections (the API Gateway management API). */
  readonly api: ConnectionApi;
  /**
   * Where sessions live. The gateway writes them, the fan-out finishes the sessions of gone
   * connections; the broker is handed the same cache, so that it keeps its sessions there too.
   */
  readonly sessions: SessionCache;
  /**
   * Where remote `unsubscribe` and `disconnect` are recorded (the fan-out runs them) and
   * where a restore checks them (the gateway): kept beside the sessions.
   * @default a {@link MemoryRevocationStore} of this composition (for sessions in memory)
   */
  readonly revocations?: RevocationStore;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
  /** @default the system clock */
  readonly clock?: Clock;
  /** Pauses of a remote `unsubscribe` ({@link FanoutOptions.sleep}). @default `setTimeout` */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Posts in flight at once, in a fan-out and in a pinger tick. @default 50 */
  readonly concurrency?: number;
  /** Subscribers read per page of a fan-out. @default 1000 */
  readonly pageSize?: number;
  /** A connection younger than this (ms) is not disconnected on a 410. @default 10000 */
  readonly goneGraceMs?: number;
  /** Later passes over throttled posts ({@link FanoutOptions.retryPasses}). @default 5 */
  readonly retryPasses?: number;
  /** Wait before the first later pass, ms ({@link FanoutOptions.retryBackoffMs}). @default 100 */
  readonly retryBackoffMs?: number;
  /** Time the later passes of one delivery may take, ms. @default 3000 */
  readonly retryBudgetMs?: number;
  /** How long a connection given up on gets no later passes, ms. @default 60000 */
  readonly stuckMs?: number;
  /**
   * Fan-out tasks ({@link FanoutOptions.tasks}): audiences over `taskSize` delivered by
   * invocations of their own. @default none: one fan-out posts to a whole audience
   */
  readonly tasks?: FanoutTasksOptions;
  /**
   * Presence: the fan-out drops the presence of gone connections; with `composeRealtime`, the
   * gateway runs the presence commands and the pinger expires dropped sessions. @default off
   */
  readonly presence?: PresenceSettings;
}

/** The delivery path: the fan-out, and the broker that feeds it. */
export interface Delivery<B extends Broker> {
  /** The broker's broadcaster: posts to each stream's subscribers. */
  readonly fanout: Fanout;
  /** The broker, built over the fan-out. */
  readonly broker: B;
  /** Where the fan-out records remote revocations (the gateway's too, composed with it). */
  readonly revocations: RevocationStore;
}

/**
 * The delivery path, the first stage of `composeRealtime`, in a module of its own for the
 * broadcast consumer, which needs no gateway: the fan-out, then the broker over it. This
 * module imports neither the gateway nor the pinger, so neither is in that bundle.
 */
export function composeDelivery<B extends Broker>(
  options: ComposeDeliveryOptions,
  broker: (broadcaster: Broadcaster, sessions: SessionCache) => B,
): Delivery<B> {
  const { store, api, sessions, logger, clock, concurrency, goneGraceMs } = options;
  const revocations = options.revocations ?? new MemoryRevocationStore();
  const fanout = new Fanout({
    store,
    api,
    sessions,
    revocations,
    logger,
    clock,
    sleep: options.sleep,
    concurrency,
    pageSize: options.pageSize,
    goneGraceMs,
    retryPasses: options.retryPasses,
    retryBackoffMs: options.retryBackoffMs,
    retryBudgetMs: options.retryBudgetMs,
    stuckMs: options.stuckMs,
    tasks: options.tasks,
    presence: options.presence,
  });
  return { fanout, broker: broker(fanout, sessions), revocations };
}
