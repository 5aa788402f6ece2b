import type { HistoryReader } from '../../broker/types.js';
import type { Clock } from '../../kernel/clock.js';
import type { Logger } from '../../kernel/logger.js';
import type { SessionFinisher } from '../gone.js';
import type { ConnectionApi, ConnectionStore } from '../ports.js';
import type { PresenceSettings } from '../presence/settings.js';
import type { PartitionScope } from './partitions.js';
import type { Welcomer } from './ports.js';

/** What a pinger run did. */
export interface PingReport {
  /** Connections known now (at the end of the run). */
  readonly connections: number;
  /** Their pings per second: the sum of `1 / interval` (seconds) over them. */
  readonly load: number;
  /** Pings delivered. */
  readonly sent: number;
  /** Pings left out: the connection had a broadcast within its interval. */
  readonly spared: number;
  /** Welcomes (or refusals) delivered. */
  readonly welcomed: number;
  /** Connections that answered 410 and were forgotten. */
  readonly gone: number;
  /** Posts that threw. */
  readonly failed: number;
  /** Store and history reads: pages of changes, subscription lists, activity lookups. */
  readonly reads: number;
}

/** Options of `Pinger`. */
export interface PingerOptions {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  /** Delivers welcomes: the gateway. */
  readonly welcomer: Welcomer;
  /** Finishes the sessions of gone connections. */
  readonly sessions: SessionFinisher;
  /**
   * Stream activity: with `lastBroadcastAt`, a connection whose streams had a broadcast
   * within its interval is spared its ping. @default none: every ping is sent
   */
  readonly history?: Pick<HistoryReader, 'lastBroadcastAt'>;
  /**
   * The buckets this run reads and the connections it keeps: its partition's
   * (`partitionScope`). @default every bucket and connection: one run for all
   */
  readonly scope?: PartitionScope;
  /** Seconds between pings of a connection that did not choose one (`pi`). */
  readonly defaultInterval: number;
  /** @default the system clock */
  readonly clock?: Clock;
  /** @default `noopLogger` */
  readonly logger?: Logger;
  /** @default 50 */
  readonly concurrency?: number;
  /**
   * Changes read before the last read's start are read again for this long (ms): index
   * replication and writers' clocks lag.
   * @default 1000
   */
  readonly overlapMs?: number;
  /**
   * Every this many ms, a read goes back `lateWindowMs` instead of `overlapMs`, so
   * that a write stored long after it was dated (a throttled and retried `PutItem`, a busy
   * `$connect`, a lagging index) is still found, and its connection welcomed.
   * @default 5000
   */
  readonly lateReadEveryMs?: number;
  /**
   * How far back (ms) those reads go. 35 s covers a connection's whole `$connect` (API
   * Gateway ends it at 29 s, and a connection whose `$connect` failed is never reachable)
   * plus the index's replication. Keep it under `welcomeTimeoutMs`: a run's first read
   * takes connections older than that as welcomed by an earlier run.
   * @default 35000
   */
  readonly lateWindowMs?: number;
  /**
   * Stream activity older than this (ms) is read again before a ping is spared for it.
   * @default 1000
   */
  readonly activityMaxAgeMs?: number;
  /**
   * How long (ms) after `$connect` began a new connection's welcome is retried while API
   * Gateway answers 410 (until `$connect` has returned, which under load takes seconds; a
   * client without its welcome waits for it indefinitely). Retries back off to one every 2 s.
   * @default 60000
   */
  readonly welcomeTimeoutMs?: number;
  /** @default 10000 (see `disconnectGone`) */
  readonly goneGraceMs?: number;
  /**
   * Presence: a gone connection's is dropped, and a tick at least `presenceExpiryEveryMs`
   * after the last expiry expires the dropped sessions of this run's buckets whose TTL is over
   * (the store writes their leaves). @default off
   */
  readonly presence?: PresenceSettings;
  /**
   * How often (ms) the ticks expire presence: each expiry Queries every bucket of the run
   * (B ≥ 8), so a 250 ms tick doing it every time would double the pinger's index reads. A
   * leave goes out at most this long after its TTL. @default 1000
   */
  readonly presenceExpiryEveryMs?: number;
}
