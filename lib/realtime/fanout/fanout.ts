import { MemoryRevocationStore } from '../../adapters/memory/revocations.js';
import type { Broadcaster, RemoteCommandMessage, StreamMessage } from '../../broker/types.js';
import { systemClock } from '../../kernel/clock.js';
import { forEachConcurrently } from '../../kernel/concurrency.js';
import { ConfigError, errorMessage, ThrottledError } from '../../kernel/errors.js';
import { type Logger, noopLogger } from '../../kernel/logger.js';
import type { RevocationStore } from '../auth/ports.js';
import { disconnectGone, type GonePolicy } from '../gone.js';
import type { ConnectionApi, ConnectionStore, Subscription } from '../ports.js';
import { broadcastFrame } from '../protocol.js';
import type { FanoutOptions } from './options.js';
import type {
  DeliveryCounts,
  DeliveryReport,
  FanoutTask,
  FanoutTaskReport,
  RemoteCommandDeps,
  StreamDelivery,
} from './ports.js';
import { runRemoteCommand } from './remote.js';
import { DEFAULT_RETRY_BACKOFF_MS, DEFAULT_RETRY_PASSES } from './settings.js';
import { DeadlinePassedError, FanoutTree } from './tree.js';
import { removeSubscribers } from './unsubscribe.js';

export type { FanoutOptions } from './options.js';
export type { DeliveryCounts, DeliveryReport, StreamDelivery } from './ports.js';

/** A post to make: one frame to one connection. */
interface Post {
  readonly connectionId: string;
  readonly frame: string;
  readonly endpoint: string | undefined;
}

/**
 * The {@link Broadcaster} of API Gateway WebSockets: fans a stream message out to the
 * stream's subscribers in the {@link ConnectionStore}, page by page, with bounded
 * concurrency. A 410 disconnects that connection ({@link disconnectGone}, which finishes its
 * session); a failing post is logged and never stops the others. It also carries out remote
 * commands (disconnect an identity or a connection, unsubscribe a stream).
 *
 * `subscribe` and `unsubscribe` do nothing: under Lambda no process keeps local subscribers
 * (every subscription is in the {@link ConnectionStore}), so a broker's calls to them, when
 * its first or last local subscriber of a stream comes or goes, have nothing to track.
 */
export class Fanout implements Broadcaster, StreamDelivery {
  private readonly store: ConnectionStore;
  private readonly api: ConnectionApi;
  private readonly logger: Logger;
  private readonly concurrency: number;
  private readonly pageSize: number;
  private readonly revocations: RevocationStore;
  private readonly gone: GonePolicy;
  private readonly retryPasses: number;
  private readonly retryBackoffMs: number;
  private readonly retryBudgetMs: number;
  private readonly stuckMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Connections given up on, and until when (ms) they get no later pass. */
  private readonly stuck = new Map<string, number>();
  private counts: DeliveryCounts = emptyCounts();
  private readonly tree: FanoutTree | undefined;

  constructor(options: FanoutOptions) {
    this.store = options.store;
    this.api = options.api;
    this.logger = options.logger ?? noopLogger;
    this.concurrency = options.concurrency ?? 50;
    this.pageSize = options.pageSize ?? 1000;
    this.revocations = options.revocations ?? new MemoryRevocationStore();
    this.gone = {
      store: options.store,
      sessions: options.sessions,
      clock: options.clock ?? systemClock,
      goneGraceMs: options.goneGraceMs ?? 10_000,
      presence: options.presence,
    };
    this.retryPasses = options.retryPasses ?? DEFAULT_RETRY_PASSES;
    this.retryBackoffMs = options.retryBackoffMs ?? DEFAULT_RETRY_BACKOFF_MS;
    this.retryBudgetMs = options.retryBudgetMs ?? 3000;
    this.stuckMs = options.stuckMs ?? 60_000;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    for (const [variable, value] of Object.entries({
      retryPasses: this.retryPasses,
      retryBackoffMs: this.retryBackoffMs,
      retryBudgetMs: this.retryBudgetMs,
      stuckMs: this.stuckMs,
    })) {
      if (!Number.isSafeInteger(value) || value < 0) {
        throw new ConfigError(`${variable} must be an integer >= 0, got: ${value}`, { variable });
      }
    }
    this.tree = options.tasks
      ? new FanoutTree({
          ...options.tasks,
          store: this.store,
          logger: this.logger,
          clock: this.gone.clock,
          sleep: this.sleep,
          post: (message, subscribers, asTask, action, deadline) =>
            action === 'unsubscribe'
              ? removeSubscribers(
                  this.store,
                  this.concurrency,
                  subscribers,
                  this.gone.presence?.store,
                )
              : this.postMessage(
                  message,
                  subscribers,
                  asTask ? (options.tasks?.retryBudgetMs ?? 20_000) : undefined,
                  deadline,
                ),
        })
      : undefined;
    if (!(this.concurrency >= 1)) {
      throw new ConfigError('concurrency must be at least 1', { variable: 'concurrency' });
    }
  }

  async broadcast(msg: StreamMessage): Promise<void> {
    if (this.tree) {
      const report = await this.tree.run({ message: msg });
      // A delivery by tasks is worth a line: how many invocations, the most posts of one.
      if (report.invocations > 1)
        this.logger.info('fan-out tasks', { target: msg.stream, ...report });
      else this.logger.debug('broadcast', { target: msg.stream, ...report });
      return;
    }
    const report = await this.deliver(msg.stream, (sub) => broadcastFrame(sub.identifier, msg));
    this.accountFor(msg, report);
  }

  /** Runs one fan-out task (the `deliver` function's): needs the `tasks` option. */
  async runTask(task: FanoutTask): Promise<FanoutTaskReport> {
    if (!this.tree) {
      throw new ConfigError('a fan-out task needs the tasks option of Fanout', {
        variable: 'tasks',
      });
    }
    return this.tree.run(task);
  }

  /** Posts a message to exactly these subscribers, with the later passes: a task's own posts. */
  private async postMessage(
    msg: StreamMessage,
    subscribers: readonly Subscription[],
    budgetMs?: number,
    deadline?: number,
  ): Promise<DeliveryReport> {
    const report = emptyReport();
    const missed: Post[] = [];
    await this.postAll(
      subscribers,
      (sub) => broadcastFrame(sub.identifier, msg),
      report,
      missed,
      deadline,
    );
    // A task's posts wait their turn within its budget, pass after pass, by its deadline.
    const passes = budgetMs === undefined || this.retryPasses === 0 ? this.retryPasses : Infinity;
    let budget = budgetMs ?? this.retryBudgetMs;
    if (deadline !== undefined)
      budget = Math.max(0, Math.min(budget, deadline - this.gone.clock.now()));
    await this.retryLater(missed, report, passes, budget);
    this.count(report);
    this.accountFor(msg, report);
    return report;
  }

  /** Counts a message's possible duplicates and logs each frame given up on. */
  private accountFor(msg: StreamMessage, report: DeliveryReport): void {
    if (msg.meta?.redelivered) this.counts.redelivered += report.sent;
    for (const f of report.failed) {
      this.logger.error('broadcast: frame undelivered', {
        target: msg.stream,
        connectionId: f.connectionId,
        retried: f.retried,
        error: errorMessage(f.error),
      });
    }
    this.logger.debug('broadcast', {
      target: msg.stream,
      sent: report.sent,
      gone: report.gone.length,
      failed: report.failed.length,
      retried: report.retried,
    });
  }

  /** The frames counted since the last call (delivered, undelivered, retried, ...), then zero. */
  takeCounts(): DeliveryCounts {
    const counts = this.counts;
    this.counts = emptyCounts();
    return counts;
  }

  async deliver(
    stream: string,
    render: (sub: Subscription) => string | undefined,
    except?: string,
    options: { readonly retry?: boolean } = {},
  ): Promise<DeliveryReport> {
    const report = emptyReport();
    const missed: Post[] = [];
    for await (const page of this.store.subscribersOf(stream, this.pageSize)) {
      const targets = page.filter((s) => s.connectionId !== except);
      await this.postAll(targets, render, report, missed);
    }
    if (options.retry !== false) await this.retryLater(missed, report);
    this.count(report);
    return report;
  }

  /**
   * First posts of a frame to each subscriber; the throttled ones are added to `missed`. At or
   * past `deadline`, a post is not started: given up (`report.failed`, {@link DeadlinePassedError}).
   */
  private async postAll(
    targets: readonly Subscription[],
    render: (sub: Subscription) => string | undefined,
    report: DeliveryReport,
    missed: Post[],
    deadline = Number.POSITIVE_INFINITY,
  ): Promise<void> {
    await forEachConcurrently(targets, this.concurrency, async (sub) => {
      const frame = render(sub);
      if (frame === undefined) return;
      if (this.gone.clock.now() >= deadline) {
        report.failed.push({ connectionId: sub.connectionId, error: deadlinePassed, retried: 0 });
        return;
      }
      const endpoint = sub.endpoint ?? (await this.endpointOf(sub.connectionId));
      const post = { connectionId: sub.connectionId, frame, endpoint };
      if ((await this.postOne(post, report)) === 'throttled') missed.push(post);
    });
  }

  /**
   * Posts again, pass after pass with a growing jittered wait, to just the connections whose
   * post was throttled: a throttled post delivered nothing, so its retry never duplicates it.
   * What is still throttled after the last pass, or once the budget is spent, stays in
   * `report.failed`, and its connection is marked stuck for a while (no later passes).
   */
  private async retryLater(
    missed: Post[],
    report: DeliveryReport,
    passes = this.retryPasses,
    budgetMs = this.retryBudgetMs,
  ): Promise<void> {
    const now = this.gone.clock.now();
    for (const [id, until] of this.stuck) if (until <= now) this.stuck.delete(id);
    let pending = missed.filter((p) => !this.stuck.has(p.connectionId));
    const deadline = now + budgetMs;
    for (let pass = 1; pass <= passes && pending.length > 0; pass++) {
      const left = deadline - this.gone.clock.now();
      if (left <= 0) break;
      const ceiling = Math.min(this.retryBackoffMs * 2 ** (pass - 1), MAX_BACKOFF_MS, left);
      await new Promise((r) => setTimeout(r, Math.random() * ceiling));
      const retrying = new Set(pending.map((p) => p.connectionId));
      report.failed = report.failed.filter((f) => !retrying.has(f.connectionId));
      report.retried += pending.length;
      const again: Post[] = [];
      await forEachConcurrently(pending, this.concurrency, async (post) => {
        const outcome = await this.postOne(post, report, pass);
        if (outcome === 'throttled') again.push(post);
      });
      pending = again;
    }
    const until = this.gone.clock.now() + this.stuckMs;
    for (const f of report.failed) if (f.retried > 0) this.stuck.set(f.connectionId, until);
  }

  private count(report: DeliveryReport): void {
    this.counts.delivered += report.sent;
    this.counts.undelivered += report.failed.length;
    this.counts.retried += report.retried;
    this.counts.gone += report.gone.length;
  }

  async broadcastCommand(cmd: RemoteCommandMessage): Promise<void> {
    await runRemoteCommand(this.remote(), cmd);
  }

  /** Does nothing: Lambda keeps no local subscribers (see {@link Fanout}). */
  async subscribe(_stream: string): Promise<void> {}

  /** Does nothing: Lambda keeps no local subscribers (see {@link Fanout}). */
  async unsubscribe(_stream: string): Promise<void> {}

  /**
   * Posts one frame, recording the outcome (`retried`: the later passes before this post); a
   * 410 goes to {@link disconnectGone}, whose own failure is logged, not counted as the frame's.
   */
  private async postOne(
    post: Post,
    report: DeliveryReport,
    retried = 0,
  ): Promise<'sent' | 'gone' | 'failed' | 'throttled'> {
    const { connectionId, frame, endpoint } = post;
    let result: 'sent' | 'gone';
    try {
      result = await this.api.post(connectionId, frame, endpoint);
    } catch (error) {
      report.failed.push({ connectionId, error, retried });
      return error instanceof ThrottledError ? 'throttled' : 'failed';
    }
    if (result === 'sent') {
      report.sent++;
      return 'sent';
    }
    report.gone.push(connectionId);
    await disconnectGone(this.gone, connectionId).catch((error: unknown) =>
      this.logger.error('gone connection not removed', {
        connectionId,
        error: errorMessage(error),
      }),
    );
    return 'gone';
  }

  private remote(): RemoteCommandDeps {
    const { store, api, logger, concurrency, pageSize, revocations, tree } = this;
    return {
      store,
      api,
      logger,
      concurrency,
      pageSize,
      revocations,
      clock: this.gone.clock,
      sleep: this.sleep,
      presence: this.gone.presence?.store,
      postOne: (p, r) => this.postOne(p, r),
      ...(tree
        ? {
            removeAudience: async (stream: string) =>
              (await tree.run({ message: { stream, data: '' }, action: 'unsubscribe' })).sent,
          }
        : {}),
    };
  }

  // Subscriptions stored without their connection's endpoint cost one read to find it.
  private async endpointOf(connectionId: string): Promise<string | undefined> {
    return (await this.store.getConnection(connectionId))?.endpoint;
  }
}

/** The failure of every post a task did not start: its deadline had passed. */
const deadlinePassed = new DeadlinePassedError();

/** The longest wait before a later pass, in ms. */
const MAX_BACKOFF_MS = 2000;

function emptyReport(): DeliveryReport {
  return { sent: 0, gone: [], failed: [], retried: 0 };
}

function emptyCounts(): DeliveryCounts {
  return { delivered: 0, undelivered: 0, retried: 0, redelivered: 0, gone: 0 };
}
