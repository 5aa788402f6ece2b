import type { StreamMessage } from '../../broker/types.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { ConfigError, errorMessage, LambdacableError } from '../../kernel/errors.js';
import { type Logger, noopLogger } from '../../kernel/logger.js';
import type { ConnectionStore, SliceRead, Subscription } from '../ports.js';
import type { DeliveryReport, FanoutTask, FanoutTaskReport, FanoutTaskRunner } from './ports.js';
import {
  childPrefixes,
  chunk,
  HASH_DIGITS,
  PREFIX_FANOUT,
  splitRange,
  spreadFor,
} from './spread.js';

/** A sub-task failed on every attempt: the frame did not reach that part of the audience. */
export class FanoutTaskError extends LambdacableError {
  readonly stream: string;
  readonly attempts: number;
  constructor(stream: string, attempts: number, cause: unknown) {
    super(`fan-out task for stream ${stream} failed ${attempts} times: ${errorMessage(cause)}`, {
      cause,
    });
    this.name = 'FanoutTaskError';
    this.stream = stream;
    this.attempts = attempts;
  }
}

/** Why a post past its task's deadline was not started (a fan-out's `report.failed`). */
export class DeadlinePassedError extends LambdacableError {
  constructor() {
    super("the fan-out task's deadline passed: the post was not started");
    this.name = 'DeadlinePassedError';
  }
}

/**
 * What became of a task's invocation that failed, as far as its caller can tell:
 * - `not-started`: it never ran (Lambda refused the Invoke: `TooManyRequestsException`);
 * - `ended`: it ran and is over (the handler threw, or Lambda killed it at its timeout);
 * - `unknown`: it may still be running (no answer: a network failure, a timeout of the call).
 */
export type TaskOutcome = 'not-started' | 'ended' | 'unknown';

/** A task's invocation failed; {@link TaskOutcome} says whether it may still be running. */
export class TaskInvocationError extends LambdacableError {
  readonly outcome: TaskOutcome;
  constructor(message: string, outcome: TaskOutcome, cause?: unknown) {
    super(message, cause === undefined ? {} : { cause });
    this.name = 'TaskInvocationError';
    this.outcome = outcome;
  }
}

/** The outcome a runner's failure states; `unknown` for any other error. */
export function taskOutcomeOf(error: unknown): TaskOutcome {
  return error instanceof TaskInvocationError ? error.outcome : 'unknown';
}

/**
 * The time, in ms, each level of tasks keeps back from the deadline it was given when it
 * gives its sub-tasks theirs: room for the {@link FENCE_MS} wait and a run again.
 */
export const LEVEL_RESERVE_MS = 15_000;
/**
 * How long after a task's deadline its caller waits, when the task's invocation may still be
 * running, before it runs the task again or gives it up: a task starts no post at or past its
 * deadline, and a post in flight then ends within the posts' timeouts (4 s) and a second of
 * clock skew between Lambda instances.
 */
export const FENCE_MS = 5_000;
/** The time, in ms, a root task (the broadcast consumer's) has to deliver its message. */
export const ROOT_BUDGET_MS = 120_000;

/** Fan-out tasks, as the fan-out is given them: {@link FanoutTreeOptions} but the posting. */
export interface FanoutTasksOptions {
  /** Runs sub-tasks, each in an invocation of its own (the `deliver` function). */
  readonly runner: FanoutTaskRunner;
  /**
   * The most subscribers one invocation posts to. A stream with no more (and one shard) is
   * delivered by the broadcast consumer itself, with no extra hop.
   * @default 500
   */
  readonly taskSize?: number;
  /**
   * Subscribers per shard before a stream is spread over more shards (DynamoDB's
   * per-partition limits apply per shard: 1,000 writes/s, 3,000 read units/s).
   * @default 10000
   */
  readonly shardTarget?: number;
  /**
   * Runs of a failed sub-task, the first included. A task run again may post some frames a
   * second time; they are counted as redelivered.
   * @default 3
   */
  readonly taskAttempts?: number;
  /**
   * How long (ms) a sub-task keeps posting again, pass after pass, to the connections it was
   * throttled on: a large audience may meet the account's `@connections` quota.
   * @default 20000
   */
  readonly retryBudgetMs?: number;
  /**
   * The deadlines' times, in ms: a root task's budget, what each level keeps back, and the
   * wait past a deadline for a task that may still run.
   * @default {@link ROOT_BUDGET_MS}, {@link LEVEL_RESERVE_MS}, {@link FENCE_MS}
   */
  readonly timing?: {
    readonly rootBudgetMs: number;
    readonly levelReserveMs: number;
    readonly fenceMs: number;
    /** The first back-off after a refused Invoke, doubled per refusal up to 20×. @default 100 */
    readonly refusedBackoffMs?: number;
  };
}

/** Options of {@link FanoutTree}. */
export interface FanoutTreeOptions extends Omit<FanoutTasksOptions, 'retryBudgetMs'> {
  readonly store: Pick<ConnectionStore, 'readSlice' | 'spreadStream'>;
  /**
   * Posts a message to exactly these subscribers, with the later passes over throttled posts;
   * `asTask` for a sub-task's posts (the root's own are a small stream's, delivered inline).
   * With `action` `unsubscribe`, removes their subscriptions instead (`sent`: removed).
   */
  readonly post: (
    message: StreamMessage,
    subscribers: readonly Subscription[],
    asTask: boolean,
    action: FanoutTask['action'],
    deadline: number,
  ) => Promise<DeliveryReport>;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
  /** Deadlines are read from it. @default the system clock */
  readonly clock?: Clock;
  /** Waits between runs of a failed task. @default `setTimeout` */
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * Delivers one message to a stream's audience in tasks of bounded work, run by as many
 * invocations as the audience needs. A task reads at most `taskSize × 16` subscribers of its
 * slice: if it got them all, it posts to up to `taskSize` of them itself or hands them, in
 * chunks of `taskSize`, to sub-tasks; if the slice holds more, it hands each of its 16
 * sub-slices (one hex digit longer) to a sub-task, which does the same. A stream spread over
 * several shards gets a sub-task per group of shards. Every task waits for its sub-tasks, so
 * the broadcast consumer returns (and the stream's next message starts) only once every
 * subscriber has the frame or it was given up on: per connection, frames stay in order.
 */
export class FanoutTree {
  private readonly store: FanoutTreeOptions['store'];
  private readonly runner: FanoutTaskRunner;
  private readonly post: FanoutTreeOptions['post'];
  private readonly taskSize: number;
  private readonly shardTarget: number;
  private readonly taskAttempts: number;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly timing: NonNullable<FanoutTreeOptions['timing']>;

  constructor(options: FanoutTreeOptions) {
    this.clock = options.clock ?? systemClock;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.timing = options.timing ?? {
      rootBudgetMs: ROOT_BUDGET_MS,
      levelReserveMs: LEVEL_RESERVE_MS,
      fenceMs: FENCE_MS,
    };
    this.store = options.store;
    this.runner = options.runner;
    this.post = options.post;
    this.taskSize = options.taskSize ?? 500;
    this.shardTarget = options.shardTarget ?? 10_000;
    this.taskAttempts = options.taskAttempts ?? 3;
    this.logger = options.logger ?? noopLogger;
    for (const [variable, value] of Object.entries({
      taskSize: this.taskSize,
      shardTarget: this.shardTarget,
      taskAttempts: this.taskAttempts,
    })) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new ConfigError(`${variable} must be an integer >= 1, got: ${value}`, { variable });
      }
    }
  }

  /**
   * Runs one task: its own posts, and its sub-tasks at once, by its deadline (a root task's:
   * now and the root budget), each sub-task's earlier by the level reserve. Past it, the task
   * starts nothing more: so a caller that waited {@link FENCE_MS} past a task's deadline
   * knows the task posts nothing more, whatever became of its invocation.
   */
  async run(task: FanoutTask): Promise<FanoutTaskReport> {
    const root = task.shards === undefined;
    const deadline = task.deadline ?? this.clock.now() + this.timing.rootBudgetMs;
    const message = task.message;
    // Sub-tasks do what this task does, by an earlier deadline.
    const kind = {
      ...(task.action ? { action: task.action } : {}),
      deadline: deadline - this.timing.levelReserveMs,
    };
    task = { ...task, deadline };
    if (task.subscribers) return this.postOwn(task, task.subscribers, [], true);
    const [from, to] = task.shards ?? [0, 1];
    if (to - from > 1) {
      // Groups of shards: a sub-task each, until one shard is left.
      const children = splitRange(from, to, PREFIX_FANOUT).map(
        (shards): FanoutTask => ({ message, shards, ...kind }),
      );
      return this.postOwn(task, [], children, true);
    }
    const prefix = task.prefix ?? '';
    const read = await this.store.readSlice(
      { stream: message.stream, shard: from, prefix },
      // Past the full hash no sub-slice exists: read the slice whole.
      prefix.length >= HASH_DIGITS ? Number.POSITIVE_INFINITY : this.taskSize * PREFIX_FANOUT,
    );
    const spread = root ? (read.spread ?? 1) : 1;
    const children: FanoutTask[] = [];
    if (spread > 1) {
      for (const shards of splitRange(1, spread, PREFIX_FANOUT - 1)) {
        children.push({ message, shards, ...kind });
      }
    }
    let own: readonly Subscription[] = [];
    if (read.truncated) {
      for (const p of childPrefixes(prefix))
        children.push({ message, shards: [from, from + 1], prefix: p, ...kind });
    } else if (read.subscribers.length <= this.taskSize) {
      own = read.subscribers;
    } else {
      for (const part of chunk(read.subscribers, this.taskSize)) {
        children.push({ message, subscribers: part, ...kind });
      }
    }
    const report = await this.postOwn(task, own, children, !root);
    if (root) await this.respread(message.stream, spread, report.subscribers, read);
    return report;
  }

  private async postOwn(
    { message, action, deadline }: FanoutTask,
    own: readonly Subscription[],
    children: readonly FanoutTask[],
    asTask: boolean,
  ): Promise<FanoutTaskReport> {
    // Every sub-task settles before a failure is thrown: a run again of this task never
    // overlaps sub-tasks still posting.
    const [mine, ...theirs] = await Promise.allSettled([
      own.length > 0
        ? this.post(message, own, asTask, action, deadline!)
        : Promise.resolve(undefined),
      ...children.map((child) => this.runChild(child)),
    ]);
    const failed = [mine, ...theirs].find((r) => r?.status === 'rejected');
    if (failed?.status === 'rejected') throw failed.reason;
    const value = <T>(r: PromiseSettledResult<T> | undefined) =>
      r?.status === 'fulfilled' ? r.value : undefined;
    const posted = value(mine) as DeliveryReport | undefined;
    let report: FanoutTaskReport = {
      sent: posted?.sent ?? 0,
      gone: posted?.gone.length ?? 0,
      undelivered: posted?.failed.length ?? 0,
      retried: posted?.retried ?? 0,
      subscribers: own.length,
      invocations: 1,
      maxPosts: own.length,
      depth: 1,
    };
    for (const r of theirs) report = merge(report, value(r) as FanoutTaskReport);
    return report;
  }

  /**
   * A sub-task, run again when its invocation fails, by its deadline; its frames are then
   * possible duplicates. What to wait for depends on the failure ({@link TaskOutcome}): an
   * Invoke refused (`not-started`) is tried again after a jittered back-off, without using up
   * an attempt; an invocation that `ended` is run again at once; one that may still be
   * running (`unknown`) is waited out, until {@link FENCE_MS} past its deadline, so that no
   * run of it overlaps another, nor this task's return (and the stream's next frame). A
   * posting sub-task still failing at its last attempt, or at its deadline, is given up: its
   * part of the audience misses the frame (counted, logged at ERROR) and the message goes on,
   * never again to its whole audience. A removal (`unsubscribe`) is not given up: it throws.
   */
  private async runChild(task: FanoutTask): Promise<FanoutTaskReport> {
    let extra = 0;
    let refused = 0;
    // The caller's own deadline: a run again after a wait may take until a fence before it.
    const parentDeadline = task.deadline! + this.timing.levelReserveMs;
    for (let attempt = 1; ; ) {
      const deadline = task.deadline!;
      let failure: unknown;
      try {
        const report = await this.runner.run(task);
        return { ...report, invocations: report.invocations + extra };
      } catch (error) {
        failure = error;
      }
      const outcome = taskOutcomeOf(failure);
      if (outcome === 'unknown') {
        // It may still be posting: wait until it cannot be, then give the run again what is
        // left up to a fence before the caller's deadline (the caller may wait that out too).
        const fenced = deadline + this.timing.fenceMs - this.clock.now();
        if (fenced > 0) await this.sleep(fenced);
        task = { ...task, deadline: Math.max(deadline, parentDeadline - this.timing.fenceMs) };
      }
      if (outcome === 'not-started') {
        refused++;
        const first = this.timing.refusedBackoffMs ?? 100;
        const ceiling = Math.min(first * 2 ** Math.min(refused - 1, 10), first * 20);
        await this.sleep(ceiling / 2 + Math.random() * (ceiling / 2));
      } else {
        extra++;
        attempt++;
      }
      const late = this.clock.now() >= task.deadline!;
      if (attempt > this.taskAttempts || late) {
        const error = new FanoutTaskError(task.message.stream, attempt - 1 + refused, failure);
        if (task.action) throw error;
        return this.givenUp(task, error, extra);
      }
      this.logger.warn('fan-out task failed, running it again', {
        target: task.message.stream,
        attempt,
        outcome,
        error: errorMessage(failure),
      });
      if (outcome !== 'not-started') {
        task = {
          ...task,
          message: { ...task.message, meta: { ...task.message.meta, redelivered: true } },
        };
      }
    }
  }

  /** A posting sub-task given up: logged, and its known part counted as undelivered. */
  private givenUp(task: FanoutTask, error: FanoutTaskError, extra: number): FanoutTaskReport {
    const part = task.subscribers?.length ?? 0;
    this.logger.error('fan-out part given up', {
      target: task.message.stream,
      shards: task.shards,
      prefix: task.prefix,
      subscribers: task.subscribers ? part : undefined,
      error: errorMessage(error),
    });
    return {
      sent: 0,
      gone: 0,
      undelivered: part,
      retried: 0,
      subscribers: part,
      invocations: extra,
      maxPosts: 0,
      depth: 1,
    };
  }

  /** Spreads a stream whose shards outgrew `shardTarget` over more shards (best effort). */
  private async respread(
    stream: string,
    spread: number,
    subscribers: number,
    read: SliceRead,
  ): Promise<void> {
    const wanted = spreadFor(subscribers, this.shardTarget);
    if (wanted <= spread || read.spread === undefined) return;
    try {
      await this.store.spreadStream(stream, wanted);
      this.logger.info('stream spread', { target: stream, spread: wanted, subscribers });
    } catch (error) {
      this.logger.warn('stream not spread', { target: stream, error: errorMessage(error) });
    }
  }
}

function merge(a: FanoutTaskReport, b: FanoutTaskReport): FanoutTaskReport {
  return {
    sent: a.sent + b.sent,
    gone: a.gone + b.gone,
    undelivered: a.undelivered + b.undelivered,
    retried: a.retried + b.retried,
    subscribers: a.subscribers + b.subscribers,
    invocations: a.invocations + b.invocations,
    maxPosts: Math.max(a.maxPosts, b.maxPosts),
    depth: Math.max(a.depth, b.depth + 1),
  };
}
