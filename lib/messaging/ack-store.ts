/**
 * The persisted progress of one (consumer group, partition): an ack level plus the open
 * holes below it, above a floor. An offset is done exactly when it is `>= floor`,
 * `<= ackLevel` and not a hole.
 *
 * A hole is an offset that was received and not completed (its handler failed, it was
 * skipped behind a failure of its group, or an earlier delivery crashed) while the level
 * moved past it. Its message can only come back as a redrive from the DLQ (or a retry):
 * it is handled then, and only a success closes the hole.
 */
export interface AckState {
  /** Every offset at or below it is acked, except the holes. */
  readonly ackLevel: bigint;
  /** Open holes (offsets `<= ackLevel`, or about to be covered) → when they were opened, in ms. */
  readonly holes: ReadonlyMap<bigint, number>;
  /**
   * Offsets below it are not known to be done: the state was created (or created again, after
   * its item expired) at this offset, or its holes were given up. Such an offset is handled
   * when it comes, never acked unhandled. Absent on state an older release wrote.
   */
  readonly floor?: bigint;
  /** Bumped by every write: the optimistic-concurrency token of the stored item. */
  readonly version: number;
}

/** What one batch learned about one partition, merged into the stored {@link AckState}. */
export interface AckUpdate {
  /** The highest offset the batch received (completed or opened); the level rises to it. */
  readonly level?: bigint;
  /**
   * Offsets received and not completed: they become holes, or stay holes stamped anew (a
   * redriven message that failed again starts another stay in the queues).
   */
  readonly open?: readonly bigint[];
  /** The lowest offset the batch received: the floor of a state this write creates. */
  readonly floor?: bigint;
  /** Holes the batch completed. */
  readonly close?: readonly bigint[];
  /** Now, in ms: stamps new holes and expires old ones. */
  readonly now: number;
  /**
   * Holes stamped longer ago than this are dropped: their message cannot be in a queue any more.
   * @default {@link DEFAULT_HOLE_RETENTION_MS} (28 days)
   */
  readonly holeRetentionMs?: number;
  /**
   * The most holes kept: past it, every hole is given up and the floor raised above the
   * level, so the state stays one bounded item and forgets what is done, never what is not.
   * @default {@link DEFAULT_MAX_HOLES}
   */
  readonly maxHoles?: number;
}

/**
 * SQS keeps a message at most 14 days, and a FIFO queue's dead-letter queue restarts that
 * clock: a hole's message can be redriven up to 28 days after it last failed.
 */
export const DEFAULT_HOLE_RETENTION_MS = 28 * 24 * 3600 * 1000;

/**
 * Holes kept per partition: about 50 bytes each with 40-digit offsets (a map key and its
 * stamp), so 250 KB, inside DynamoDB's 400 KB item.
 */
export const DEFAULT_MAX_HOLES = 5000;

/** How long an ack item outlives its last write: longer than a hole is retained. */
export const DEFAULT_ACK_TTL_SECONDS = 30 * 24 * 3600;

/**
 * Whether `offset` is done under `state`: at or above the floor, at or below the level and
 * not an open hole.
 */
export function isAcked(state: AckState | undefined, offset: bigint): boolean {
  return (
    state !== undefined &&
    offset <= state.ackLevel &&
    (state.floor === undefined || offset >= state.floor) &&
    !state.holes.has(offset)
  );
}

/**
 * Merges `update` into `state` (the state stored when the write is attempted): the level
 * only rises; opened offsets become holes stamped `now` (a hole opened again is stamped
 * anew), closed holes are removed, expired holes dropped. A failure report is never
 * dropped, even when a concurrent writer's level already covers it: a hole too many costs
 * at most one more handler call if its message comes again, a hole lost would ack a
 * redrive unhandled. The floor is set when the state is created and only rises: past
 * `maxHoles` the holes are given up for a floor above the level, so that every offset up to
 * it is handled if it comes again. Pure, so every store merges the same way.
 */
export function applyAckUpdate(state: AckState | undefined, update: AckUpdate): AckState {
  const before = state?.ackLevel ?? -1n;
  let holes = new Map(state?.holes ?? []);
  for (const offset of update.open ?? []) holes.set(offset, update.now);
  for (const offset of update.close ?? []) holes.delete(offset);
  const oldest = update.now - (update.holeRetentionMs ?? DEFAULT_HOLE_RETENTION_MS);
  for (const [offset, at] of holes) if (at < oldest) holes.delete(offset);
  const level = update.level !== undefined && update.level > before ? update.level : before;
  let floor = state ? state.floor : update.floor;
  if (holes.size > (update.maxHoles ?? DEFAULT_MAX_HOLES)) {
    holes = new Map();
    floor = level + 1n;
  }
  return {
    ackLevel: level,
    holes,
    ...(floor === undefined ? {} : { floor }),
    version: (state?.version ?? 0) + 1,
  };
}

/**
 * The key of a (topic, partition)'s ack state within a consumer group. Offsets (outbox
 * stream sequence numbers) increase within one outbox partition, `topic#key`, and only
 * there: a group reading several topics sees, under one key (one SQS message group),
 * offsets from different stream shards, which do not order each other. So ack state is
 * kept per topic and partition. The topic is URI-encoded, so it holds no `#` and the first
 * `#` separates it from the partition (which may contain any character).
 */
export function ackPartition(topic: string, partition: string): string {
  return `${encodeURIComponent(topic)}#${partition}`;
}

/**
 * Persisted ack state per (consumer group, partition); the batch consumer's partitions are
 * {@link ackPartition}s.
 */
export interface AckStore {
  /** The stored ack level, or `undefined` if none was saved. */
  load(group: string, partition: string): Promise<bigint | undefined>;
  /** Raises the stored level to `level`; a lower or equal level changes nothing. */
  save(group: string, partition: string, level: bigint): Promise<void>;
  /** The stored level and open holes, or `undefined` if nothing was saved. */
  loadState(group: string, partition: string): Promise<AckState | undefined>;
  /**
   * Merges `update` into the stored state atomically ({@link applyAckUpdate} on what is
   * stored at write time, retried on a concurrent write) and returns the result.
   * `basis` is what the caller read with {@link loadState}: a store may write against it
   * without reading again (and re-reads when it turns out stale).
   */
  commit(
    group: string,
    partition: string,
    update: AckUpdate,
    basis?: { readonly state: AckState | undefined },
  ): Promise<AckState>;
}
