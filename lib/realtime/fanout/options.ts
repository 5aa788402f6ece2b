import type { Clock } from '../../kernel/clock.js';
import type { Logger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import type { PresenceDropper, SessionFinisher } from '../gone.js';
import type { ConnectionApi, ConnectionStore } from '../ports.js';
import type { FanoutTasksOptions } from './tree.js';

/** Options of {@link Fanout}. */
export interface FanoutOptions {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  /** Finishes the session of a connection that is gone ({@link disconnectGone}). */
  readonly sessions: SessionFinisher;
  /**
   * Where remote `unsubscribe` and `disconnect` record what they revoke, so that a stored
   * session cannot bring it back on reconnect. @default a {@link MemoryRevocationStore} of
   * its own (sessions in this process only)
   */
  readonly revocations?: RevocationStore;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
  /**
   * Posts in flight at once.
   * @default 50
   */
  readonly concurrency?: number;
  /**
   * Subscribers read per page: a stream with fewer costs one Query (a page exactly as
   * large as the stream would cost a second, empty one).
   * @default 1000
   */
  readonly pageSize?: number;
  /** @default the system clock */
  readonly clock?: Clock;
  /**
   * Pauses a remote `unsubscribe` between its reads of the stream index (a virtual clock's in
   * tests). @default `setTimeout`
   */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * A connection younger than this (ms) is not disconnected on a 410: API Gateway answers
   * 410 until `$connect` has returned, while the connection is already stored.
   * @default 10000
   */
  readonly goneGraceMs?: number;
  /**
   * Later passes over throttled posts ({@link ThrottledError}), for just the connections still
   * missing the frame; then it is counted undelivered and logged. Other failures get no later
   * pass: the connection API has already tried a 5xx or a reset socket again at once (such a
   * frame may arrive twice), and the frame is counted undelivered.
   * @default 5
   */
  readonly retryPasses?: number;
  /**
   * The most time, in ms, the later passes of one delivery may take: the stream's next frame
   * waits for them, and so does the batch's Lambda.
   * @default 3000
   */
  readonly retryBudgetMs?: number;
  /**
   * A connection whose frame was given up on gets no later pass for this long, in ms (a client
   * whose buffer stays full would otherwise hold up each frame of its streams).
   * @default 60000
   */
  readonly stuckMs?: number;
  /**
   * The wait before the first later pass, in ms; doubled per pass, with full jitter. The
   * fan-out returns only after its last pass, so the stream's next frame never overtakes it.
   * @default 100
   */
  readonly retryBackoffMs?: number;
  /** Fan-out tasks: an audience over `taskSize` is delivered by invocations of its own. */
  readonly tasks?: FanoutTasksOptions;
  /**
   * Drops the presence of a gone connection ({@link disconnectGone}); a remote `unsubscribe`
   * leaves the presence of the subscriptions it removes. @default no presence
   */
  readonly presence?: PresenceDropper;
}
