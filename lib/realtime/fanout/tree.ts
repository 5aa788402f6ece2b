import type { StreamMessage } from '../../broker/types.js';
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
    action?: FanoutTask['action'],
  ) => Promise<DeliveryReport>;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
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

  constructor(options: FanoutTreeOptions) {
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

  /** Runs one task: its own posts, and its sub-tasks at once. */
  async run(task: FanoutTask): Promise<FanoutTaskReport> {
    const { message } = task;
    // Sub-tasks do what this task does.
    const kind = task.action ? { action: task.action } : {};
    if (task.subscribers) return this.postOwn(task, task.subscribers, [], true);
    const root = task.shards === undefined;
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
    { message, action }: FanoutTask,
    own: readonly Subscription[],
    children: readonly FanoutTask[],
    asTask: boolean,
  ): Promise<FanoutTaskReport> {
    // Every sub-task settles before a failure is thrown: a run again of this task never
    // overlaps sub-tasks still posting.
    const [mine, ...theirs] = await Promise.allSettled([
      own.length > 0 ? this.post(message, own, asTask, action) : Promise.resolve(undefined),
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

  /** A sub-task, run again when its invocation fails; its frames are then possible duplicates. */
  private async runChild(task: FanoutTask): Promise<FanoutTaskReport> {
    let extra = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        const report = await this.runner.run(task);
        return { ...report, invocations: report.invocations + extra };
      } catch (error) {
        extra++;
        if (attempt >= this.taskAttempts) {
          throw new FanoutTaskError(task.message.stream, attempt, error);
        }
        this.logger.warn('fan-out task failed, running it again', {
          target: task.message.stream,
          attempt,
          error: errorMessage(error),
        });
        task = {
          ...task,
          message: { ...task.message, meta: { ...task.message.meta, redelivered: true } },
        };
      }
    }
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
