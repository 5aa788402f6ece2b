import type { Broadcaster, RemoteCommandMessage, StreamMessage } from '../broker/types.js';
import { type Clock, systemClock } from '../kernel/clock.js';
import { forEachConcurrently } from '../kernel/concurrency.js';
import { ConfigError, errorMessage } from '../kernel/errors.js';
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
  /** Posts that failed again on every later pass: these frames were not delivered. */
  failed: { connectionId: string; error: unknown }[];
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
   * (a connection id); `render` returning `undefined` skips a subscriber.
   */
  deliver(
    stream: string,
    render: (sub: Subscription) => string | undefined,
    except?: string,
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
   * Later passes over the posts that failed (after the management API's own retries), each
   * for just the connections still missing the frame. A frame still not posted after the
   * last pass is counted undelivered and logged with its connection and stream.
   * @default 5
   */
  readonly retryPasses?: number;
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
    this.retryPasses = options.retryPasses ?? 5;
    this.retryBackoffMs = options.retryBackoffMs ?? 100;
    if (!(this.retryPasses >= 0) || !(this.retryBackoffMs >= 0)) {
      throw new ConfigError('retryPasses and retryBackoffMs must be >= 0', {
        variable: 'retryPasses',
      });
    }
    if (!(this.concurrency >= 1)) {
      throw new ConfigError('concurrency must be at least 1', { variable: 'concurrency' });
    }
  }

  async broadcast(msg: StreamMessage): Promise<void> {
    const report = await this.deliver(msg.stream, (sub) => broadcastFrame(sub.identifier, msg));
    if (msg.meta?.redelivered) this.counts.redelivered += report.sent;
    this.logReport('broadcast', msg.stream, report);
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
        if ((await this.postOne(post, report)) === 'failed') missed.push(post);
      });
    }
    await this.retryLater(missed, report);
    return report;
  }

  /**
   * Posts again, pass after pass with a growing wait, to just the connections whose post
   * failed; what still fails after the last pass stays in `report.failed`. A failed post
   * (a throttle, a full client buffer) delivered nothing, so a retry never duplicates it.
   */
  private async retryLater(missed: Post[], report: DeliveryReport): Promise<void> {
    let pending = missed;
    for (let pass = 1; pass <= this.retryPasses && pending.length > 0; pass++) {
      const ceiling = this.retryBackoffMs * 2 ** (pass - 1);
      await new Promise((r) => setTimeout(r, Math.random() * ceiling));
      const failed = new Set(pending.map((p) => p.connectionId));
      report.failed = report.failed.filter((f) => !failed.has(f.connectionId));
      const again: Post[] = [];
      report.retried += pending.length;
      await forEachConcurrently(pending, this.concurrency, async (post) => {
        if ((await this.postOne(post, report)) === 'failed') again.push(post);
      });
      pending = again;
    }
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

  /** Posts one frame, recording the outcome; a 410 goes to {@link disconnectGone}. */
  private async postOne(post: Post, report: DeliveryReport): Promise<'sent' | 'gone' | 'failed'> {
    const { connectionId, frame, endpoint } = post;
    try {
      const result = await this.api.post(connectionId, frame, endpoint);
      if (result === 'sent') {
        report.sent++;
        return 'sent';
      }
      report.gone.push(connectionId);
      await disconnectGone(this.gone, connectionId);
      return 'gone';
    } catch (error) {
      report.failed.push({ connectionId, error });
      return 'failed';
    }
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
        report.failed.push({ connectionId: c.connectionId, error });
      }
    });
    this.logReport('remote disconnect', String(connectionId ?? identity), report);
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

  private logReport(what: string, target: string, report: DeliveryReport): void {
    for (const f of report.failed) {
      this.logger.error(`${what}: frame undelivered`, {
        target,
        connectionId: f.connectionId,
        passes: 1 + this.retryPasses,
        error: errorMessage(f.error),
      });
    }
    this.logger.debug(what, {
      target,
      sent: report.sent,
      gone: report.gone.length,
      failed: report.failed.length,
      retried: report.retried,
    });
  }
}

function emptyReport(): DeliveryReport {
  return { sent: 0, gone: [], failed: [], retried: 0 };
}

function emptyCounts(): DeliveryCounts {
  return { delivered: 0, undelivered: 0, retried: 0, redelivered: 0, gone: 0 };
}

/** @deprecated The old name of {@link Fanout}. */
export { Fanout as GatewayBroadcaster };
/** @deprecated The old name of {@link FanoutOptions}. */
export type GatewayBroadcasterOptions = FanoutOptions;
