import type { Broadcaster, Broker, RemoteCommandMessage, StreamMessage } from '../broker/types.js';
import { type Clock, systemClock } from '../kernel/clock.js';
import { forEachConcurrently } from '../kernel/concurrency.js';
import { errorMessage } from '../kernel/errors.js';
import { type Logger, noopLogger } from '../kernel/logger.js';
import type { ConnectionApi } from './connection-api.js';
import type { ConnectionRecord, ConnectionStore, Subscription } from './connections.js';

/** What a fan-out did. */
export interface DeliveryReport {
  /** Frames delivered. */
  sent: number;
  /** Connections that answered 410 (disconnected unless just connected: {@link disconnectGone}). */
  gone: string[];
  /** Posts that threw; the other posts went on. */
  failed: { connectionId: string; error: unknown }[];
}

/** Where sessions end: the broker's session cache. */
export type SessionFinisher = Pick<Broker, 'finishSession'>;

/** What {@link disconnectGone} needs. */
export interface GonePolicy {
  readonly store: ConnectionStore;
  readonly sessions: SessionFinisher;
  readonly clock: Clock;
  /** A connection younger than this (ms) is left alone. */
  readonly goneGraceMs: number;
}

/**
 * `$disconnect`: finishes the connection's session (its TTL starts) and removes the
 * connection and its subscriptions. `known` saves the read of the connection.
 */
export async function disconnectConnection(
  policy: Pick<GonePolicy, 'store' | 'sessions'>,
  connectionId: string,
  known?: ConnectionRecord,
): Promise<void> {
  const connection = known ?? (await policy.store.getConnection(connectionId));
  if (connection?.sid) await policy.sessions.finishSession(connection.sid);
  await policy.store.removeConnection(connectionId);
}

/**
 * The one policy for a connection that answered 410, on fan-out, whispers, remote commands
 * and pings alike: younger than `goneGraceMs` it is left alone (API Gateway answers 410
 * until `$connect` has returned, while the connection is already stored); otherwise it is
 * disconnected as by `$disconnect` ({@link disconnectConnection}). An unknown connection's
 * leftover subscriptions are removed. Returns whether it was disconnected.
 */
export async function disconnectGone(
  policy: GonePolicy,
  connectionId: string,
  known?: ConnectionRecord,
): Promise<boolean> {
  const connection = known ?? (await policy.store.getConnection(connectionId));
  if (connection && policy.clock.now() - connection.connectedAt < policy.goneGraceMs) return false;
  await disconnectConnection(policy, connectionId, connection);
  return true;
}

/** Options of {@link GatewayBroadcaster}. */
export interface GatewayBroadcasterOptions {
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
}

/** The frame of a stream message for one subscription (AnyCable's broadcast reply). */
export function broadcastFrame(identifier: string, msg: StreamMessage): string {
  const message = decodeData(msg.data);
  if (msg.meta?.transient || msg.offset === undefined || msg.epoch === undefined) {
    return JSON.stringify({ identifier, message });
  }
  return JSON.stringify({
    identifier,
    message,
    stream_id: msg.stream,
    epoch: msg.epoch,
    offset: msg.offset,
  });
}

/** A broadcast's data as subscribers see it: JSON-decoded, or the string itself when not JSON. */
export function decodeData(data: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return data;
  }
}

/**
 * The {@link Broadcaster} of API Gateway WebSockets: fans a stream message out to the
 * stream's subscribers in the {@link ConnectionStore}, page by page, with bounded
 * concurrency. A 410 disconnects that connection ({@link disconnectGone}); a failing post
 * is logged and never stops the others. Lambda keeps no local subscribers, so
 * `subscribe`/`unsubscribe` do nothing.
 */
export class GatewayBroadcaster implements Broadcaster {
  private readonly store: ConnectionStore;
  private readonly api: ConnectionApi;
  private readonly logger: Logger;
  private readonly concurrency: number;
  private readonly pageSize: number;
  private readonly gone: GonePolicy;

  constructor(options: GatewayBroadcasterOptions) {
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
    if (!(this.concurrency >= 1)) throw new RangeError('concurrency must be at least 1');
  }

  async broadcast(msg: StreamMessage): Promise<void> {
    const report = await this.deliver(msg.stream, (sub) => broadcastFrame(sub.identifier, msg));
    this.logReport('broadcast', msg.stream, report);
  }

  /**
   * Posts `render(subscription)` to every subscriber of `stream` but those of `except`
   * (a connection id); `render` returning `undefined` skips a subscriber.
   */
  async deliver(
    stream: string,
    render: (sub: Subscription) => string | undefined,
    except?: string,
  ): Promise<DeliveryReport> {
    const report: DeliveryReport = { sent: 0, gone: [], failed: [] };
    for await (const page of this.store.subscribersOf(stream, this.pageSize)) {
      const targets = page.filter((s) => s.connectionId !== except);
      await forEachConcurrently(targets, this.concurrency, async (sub) => {
        const frame = render(sub);
        if (frame === undefined) return;
        const endpoint = sub.endpoint ?? (await this.endpointOf(sub.connectionId));
        await this.postOne(sub.connectionId, frame, endpoint, report);
      });
    }
    return report;
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

  async subscribe(_stream: string): Promise<void> {}

  async unsubscribe(_stream: string): Promise<void> {}

  /** Posts one frame, recording the outcome; a 410 goes to {@link disconnectGone}. */
  async postOne(
    connectionId: string,
    frame: string,
    endpoint: string | undefined,
    report: DeliveryReport,
  ): Promise<'sent' | 'gone' | 'failed'> {
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
    const frame = JSON.stringify({
      type: 'disconnect',
      reason: 'remote',
      reconnect: typeof payload.reconnect === 'boolean' ? payload.reconnect : true,
    });
    const report: DeliveryReport = { sent: 0, gone: [], failed: [] };
    await forEachConcurrently(targets, this.concurrency, async (c) => {
      const result = await this.postOne(c.connectionId, frame, c.endpoint, report);
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
      this.logger.error(`${what}: post failed`, {
        target,
        connectionId: f.connectionId,
        error: errorMessage(f.error),
      });
    }
    this.logger.debug(what, {
      target,
      sent: report.sent,
      gone: report.gone.length,
      failed: report.failed.length,
    });
  }
}
