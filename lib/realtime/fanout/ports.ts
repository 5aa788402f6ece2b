import type { StreamMessage } from '../../broker/types.js';
import type { Subscription } from '../ports.js';

/**
 * One fan-out task: a message to one part of its stream's audience, what one invocation of
 * the `deliver` function does. The root task (no `shards`) is the broadcast consumer's own.
 */
export interface FanoutTask {
  /** The message, numbered by the broker (offset, epoch). */
  readonly message: StreamMessage;
  /** Whole shards `[from, to)` of the stream; absent: every shard, the spread read from shard 0. */
  readonly shards?: readonly [number, number];
  /** With one shard: the slice of it, a hex prefix of the subscribers' hash. @default '' */
  readonly prefix?: string;
  /** Subscribers the parent task read already: posted to as they are, with no read. */
  readonly subscribers?: readonly Subscription[];
  /**
   * What the task does to its part of the audience: posts the message (absent), or removes
   * the subscriptions (`unsubscribe`: a remote `unsubscribe` of the stream, as bounded per
   * invocation as a broadcast).
   */
  readonly action?: 'unsubscribe';
}

/** What a task and the tasks under it did. */
export interface FanoutTaskReport {
  /** Frames delivered. */
  readonly sent: number;
  /** Connections that answered 410. */
  readonly gone: number;
  /** Frames given up on (each counted and logged where it was given up). */
  readonly undelivered: number;
  /** Posts made again on a later pass. */
  readonly retried: number;
  /** Subscribers the task's part of the audience held. */
  readonly subscribers: number;
  /** Invocations: this one and every one under it (a task run again counts again). */
  readonly invocations: number;
  /** The most posts one invocation made (first passes). */
  readonly maxPosts: number;
  /** The longest chain of invocations, this one included. */
  readonly depth: number;
}

/** Runs a fan-out task in an invocation of its own: the `deliver` function (or, in tests, in process). */
export interface FanoutTaskRunner {
  /** Runs the task and resolves to its report; rejects when the invocation failed. */
  run(task: FanoutTask): Promise<FanoutTaskReport>;
}
