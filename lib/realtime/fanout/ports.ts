import type { StreamMessage } from '../../broker/types.js';
import type { Clock } from '../../kernel/clock.js';
import type { Logger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import type { ConnectionApi, ConnectionStore, Subscription } from '../ports.js';
import type { PresenceStore } from '../presence/ports.js';

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
  /**
   * When the task must have started its last post (ms since the epoch): past it, it starts
   * none, nor a sub-task. Set by the parent, earlier than its own; absent on a root task
   * (it gets now and the root budget).
   */
  readonly deadline?: number;
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

/** What a fan-out did. */
export interface DeliveryReport {
  /** Frames delivered. */
  sent: number;
  /** Connections that answered 410 (disconnected unless just connected: {@link disconnectGone}). */
  gone: string[];
  /**
   * Posts given up on: not throttled (not retried), or throttled again on every later pass.
   * `retried` counts the later passes made for it.
   */
  failed: { connectionId: string; error: unknown; retried: number }[];
  /** Posts made again on a later pass, after a first one failed (throttled, say). */
  retried: number;
}

/** Frames counted since the last {@link Fanout.takeCounts}: what a handler turns into metrics. */
export interface DeliveryCounts {
  /** Frames delivered. */
  delivered: number;
  /** Frames given up on after every later pass failed: each one is also logged. */
  undelivered: number;
  /** Posts made again on a later pass. */
  retried: number;
  /** Frames of a redelivered message (see `StreamMessage.meta.redelivered`): possible duplicates. */
  redelivered: number;
  /** Connections found gone (410). */
  gone: number;
}

/** Delivers frames to the subscribers of a stream: what the gateway needs of the fan-out (whispers). */
export interface StreamDelivery {
  /**
   * Posts `render(subscription)` to every subscriber of `stream` but those of `except`
   * (a connection id); `render` returning `undefined` skips a subscriber. With `retry`
   * false, a throttled post is not tried again in a later pass (a whisper is not worth the
   * wait).
   */
  deliver(
    stream: string,
    render: (sub: Subscription) => string | undefined,
    except?: string,
    options?: { readonly retry?: boolean },
  ): Promise<DeliveryReport>;
}

/** What the remote commands need of the fan-out. */
export interface RemoteCommandDeps {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  readonly logger: Logger;
  /** Where revocations are recorded, so that a stored session cannot undo them. */
  readonly revocations: RevocationStore;
  /**
   * Removes every subscription to a stream in fan-out tasks, each of bounded work, and
   * resolves to how many it removed; absent, the command removes them itself.
   */
  readonly removeAudience?: (stream: string) => Promise<number>;
  /** Presence of the subscriptions a remote `unsubscribe` removes. @default none */
  readonly presence?: Pick<PresenceStore, 'leave'>;
  /** Posts in flight at once. */
  readonly concurrency: number;
  /** Subscribers read per page. */
  readonly pageSize: number;
  /** Times the wait for the stream index ({@link awaitIndex}). */
  readonly clock: Clock;
  /** Pauses between reads of the stream index (a virtual one in tests). */
  sleep(ms: number): Promise<void>;
  /** Posts one frame, recording the outcome in `report` (a 410 disconnects the connection). */
  postOne(
    post: { connectionId: string; frame: string; endpoint: string | undefined },
    report: DeliveryReport,
  ): Promise<'sent' | 'gone' | 'failed' | 'throttled'>;
}
