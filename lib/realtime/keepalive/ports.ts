import type { ConnectionRecord } from '../ports.js';
import type { PartitionReport, PingerLayout } from './partitions.js';

/** The pinger's shared state: the layout and the latest report of each partition. */
export interface PingerLayoutStore {
  /** The stored layout, or `DEFAULT_LAYOUT` (8 buckets, 1 partition) when none is. */
  layout(): Promise<PingerLayout>;
  /** Stores `next` if the stored layout is still `current`; returns whether it did. */
  replaceLayout(current: PingerLayout, next: PingerLayout): Promise<boolean>;
  /** The latest report of each partition that wrote one (old ones included). */
  reports(): Promise<PartitionReport[]>;
  /** Stores a partition's report unless one of a later run (`startedAt`) is stored. */
  putReport(report: PartitionReport): Promise<void>;
}

/** Starts pinger runs of other partitions: an asynchronous invocation of the pinger. */
export interface PingerInvoker {
  /** Starts the run of `run.partition`, without waiting for it. */
  start(run: PartitionRun): Promise<void>;
}

/** One partition's run of a minute: the event a worker is invoked with. */
export interface PartitionRun {
  readonly partition: number;
  /** K of this minute. */
  readonly partitions: number;
  /** B of this minute. */
  readonly buckets: number;
}

/** The welcome the pinger delivers to new connections: `Gateway.welcome`. */
export interface Welcomer {
  /** Delivers the welcome; `false` when the connection is not reachable yet (call again). */
  welcome(connectionId: string, known?: ConnectionRecord): Promise<boolean>;
}
