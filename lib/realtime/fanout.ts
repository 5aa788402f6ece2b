import type { Broadcaster, RemoteCommandMessage, StreamMessage } from '../broker/types.js';
import { type Clock, systemClock } from '../kernel/clock.js';
import { forEachConcurrently } from '../kernel/concurrency.js';
import { ConfigError, errorMessage, ThrottledError } from '../kernel/errors.js';
import { type Logger, noopLogger } from '../kernel/logger.js';
import type { ConnectionApi } from './connection-api.js';
import type { ConnectionRecord, ConnectionStore, Subscription } from './connections.js';
import { disconnectGone, type GonePolicy, type SessionFinisher } from './gone.js';
import { broadcastFrame, disconnectFrame } from './protocol.js';

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

/** Options of {@link Fanout}. */
export interface FanoutOptions {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  /** Finishes the session of a connection that is gone ({@link disconnectGone}). */
  readonly sessions: SessionFinisher;
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
   * A connection younger than this (ms) is not disconnected on a 410: API Gateway answers
   * 410 until `$connect` has returned, while the connection is already stored.
   * @default 10000
   */
  readonly goneGraceMs?: number;
  /**
   * Later passes over the posts that were throttled ({@link ThrottledError}, after the
   * management API adapter's own retries), each for just the connections still missing the
   * frame. A frame still not posted after the last pass, or when {@link retryBudgetMs} is
   * spent, is counted undelivered and logged with its connection and stream. Other failures
   * are not retried: a post that timed out may have been delivered.
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
}

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
  private readonly gone: GonePolicy;
  private readonly retryPasses: number;
  private readonly retryBackoffMs: number;
  private readonly retryBudgetMs: number;
  private readonly stuckMs: number;
  /** Connections given up on, and until when (ms) they get no later pass. */
  private readonly stuck = new Map<string, number>();
  private counts: DeliveryCounts = emptyCounts();

  constructor(options: FanoutOptions) {
    this.store = options.store;
    this.api = options.api;
    this.logger = options.logger ?? noopLogger;
    this.concurrency = options.concurrency ?? 50;
    this.pageSize = options.pageSize ?? 1000;
    this.gone = {
      store: options.store,
      sessions: options.sessions,
      clock: options.clock ?? systemClock,
      goneGraceMs: options.goneGraceMs ?? 10_000,
    };
    this.retryPasses = options.retryPasses ?? DEFAULT_RETRY_PASSES;
    this.retryBackoffMs = options.retryBackoffMs ?? DEFAULT_RETRY_BACKOFF_MS;
    this.retryBudgetMs = options.retryBudgetMs ?? 3000;
    this.stuckMs = options.stuckMs ?? 60_000;
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
    if (!(this.concurrency >= 1)) {
      throw new ConfigError('concurrency must be at least 1', { variable: 'concurrency' });
    }
  }

  async broadcast(msg: StreamMessage): Promise<void> {
    const report = await this.deliver(msg.stream, (sub) => broadcastFrame(sub.identifier, msg));
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
      await forEachConcurrently(targets, this.concurrency, async (sub) => {
        const frame = render(sub);
        if (frame === undefined) return;
        const endpoint = sub.endpoint ?? (await this.endpointOf(sub.connectionId));
        const post = { connectionId: sub.connectionId, frame, endpoint };
        if ((await this.postOne(post, report)) === 'throttled') missed.push(post);
      });
    }
    if (options.retry !== false) await this.retryLater(missed, report);
    this.count(report);
    return report;
  }

  /**
   * Posts again, pass after pass with a growing jittered wait, to just the connections whose
   * post was throttled: a throttled post delivered nothing, so its retry never duplicates it.
   * What is still throttled after the last pass, or once the budget is spent, stays in
   * `report.failed`, and its connection is marked stuck for a while (no later passes).
   */
  private async retryLater(missed: Post[], report: DeliveryReport): Promise<void> {
    const now = this.gone.clock.now();
    for (const [id, until] of this.stuck) if (until <= now) this.stuck.delete(id);
    let pending = missed.filter((p) => !this.stuck.has(p.connectionId));
    const deadline = now + this.retryBudgetMs;
    for (let pass = 1; pass <= this.retryPasses && pending.length > 0; pass++) {
      const left = deadline - this.gone.clock.now();
      if (left <= 0) break;
      const ceiling = Math.min(this.retryBackoffMs * 2 ** (pass - 1), left);
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
    const payload = (
      typeof cmd.payload === 'object' && cmd.payload !== null ? cmd.payload : {}
    ) as Record<string, unknown>;
    if (cmd.command === 'disconnect') {
      await this.remoteDisconnect(payload);
    } else if (cmd.command === 'unsubscribe') {
      await this.remoteUnsubscribe(payload);
    } else {
      this.logger.warn('unknown remote command', { command: cmd.command });
    }
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

  // Subscriptions stored without their connection's endpoint cost one read to find it.
  private async endpointOf(connectionId: string): Promise<string | undefined> {
    return (await this.store.getConnection(connectionId))?.endpoint;
  }

  private async remoteDisconnect(payload: Record<string, unknown>): Promise<void> {
    // AnyCable's remote disconnect names the identity `identifier`; `identity` is accepted too.
    const identity = payload.identity ?? payload.identifier;
    const connectionId = payload.connectionId;
    let targets: ConnectionRecord[];
    if (typeof connectionId === 'string') {
      const c = await this.store.getConnection(connectionId);
      targets = c ? [c] : [];
    } else if (typeof identity === 'string') {
      targets = await this.store.connectionsOf(identity);
    } else {
      this.logger.warn('remote disconnect without identity or connectionId', { payload });
      return;
    }
    const frame = disconnectFrame(
      'remote',
      typeof payload.reconnect === 'boolean' ? payload.reconnect : true,
    );
    const report = emptyReport();
    await forEachConcurrently(targets, this.concurrency, async (c) => {
      const post = { connectionId: c.connectionId, frame, endpoint: c.endpoint };
      const result = await this.postOne(post, report);
      if (result === 'gone') return;
      try {
        await this.api.close(c.connectionId, c.endpoint);
      } catch (error) {
        report.failed.push({ connectionId: c.connectionId, error, retried: 0 });
      }
    });
    const target = String(connectionId ?? identity);
    for (const f of report.failed) {
      this.logger.error('remote disconnect: post failed', {
        target,
        connectionId: f.connectionId,
        error: errorMessage(f.error),
      });
    }
    this.logger.debug('remote disconnect', {
      target,
      sent: report.sent,
      gone: report.gone.length,
      failed: report.failed.length,
    });
  }

  private async remoteUnsubscribe(payload: Record<string, unknown>): Promise<void> {
    const stream = payload.stream;
    if (typeof stream !== 'string' || !stream) {
      this.logger.warn('remote unsubscribe without stream', { payload });
      return;
    }
    const subs: Subscription[] = [];
    for await (const page of this.store.subscribersOf(stream, this.pageSize)) subs.push(...page);
    await forEachConcurrently(subs, this.concurrency, (s) =>
      this.store.removeSubscription(s.connectionId, s.stream, s.identifier),
    );
    this.logger.info('remote unsubscribe', { stream, subscriptions: subs.length });
  }
}

/** Later passes over throttled posts, by default. */
export const DEFAULT_RETRY_PASSES = 5;
/** The wait before the first later pass, in ms, by default. */
export const DEFAULT_RETRY_BACKOFF_MS = 100;

function emptyReport(): DeliveryReport {
  return { sent: 0, gone: [], failed: [], retried: 0 };
}

function emptyCounts(): DeliveryCounts {
  return { delivered: 0, undelivered: 0, retried: 0, redelivered: 0, gone: 0 };
}
