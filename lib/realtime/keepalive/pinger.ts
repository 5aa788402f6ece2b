import { type Clock, systemClock } from '../../kernel/clock.js';
import { forEachConcurrently } from '../../kernel/concurrency.js';
import { ConfigError, errorMessage } from '../../kernel/errors.js';
import { type Logger, noopLogger } from '../../kernel/logger.js';
import { disconnectGone, type GonePolicy } from '../gone.js';
import type {
  ConnectionApi,
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
} from '../ports.js';
import type { PresenceStore } from '../presence/ports.js';
import { pingFrame } from '../protocol.js';
import type { PingerOptions, PingReport } from './options.js';
import type { Welcomer } from './ports.js';

export type { PingerOptions, PingReport } from './options.js';
export type { Welcomer } from './ports.js';

/** Items per page of the pinger's reads: its first read covers every connection. */
const READ_PAGE = 1000;
/** Departures one presence expiry takes at most; a full one goes on at the next tick. */
const EXPIRE_LIMIT = 100;
/** The default of {@link PingerOptions.presenceExpiryEveryMs}. */
export const PRESENCE_EXPIRY_EVERY_MS = 1000;

interface Tracked {
  record: ConnectionRecord;
  /** When the stored connection last changed, as read. */
  changedAt: number;
  intervalMs: number;
  /** The last frame it is known to have received (welcome, ping, broadcast), or `undefined`. */
  lastFrameAt: number | undefined;
  /** When it is due next: a ping, or for an unwelcomed one another welcome attempt. */
  dueAt: number;
  welcomed: boolean;
  /** Welcome attempts that found the connection not reachable yet. */
  welcomeMisses: number;
  /** Found by the run's first read: an earlier run may have welcomed and pinged it. */
  foundFirst: boolean;
}

/**
 * The keepalive of the WebSocket API, one instance per pinger run: it reads every connection
 * and subscription once ({@link start}), then on each {@link tick} only what changed since
 * its last read, so its read cost grows with new connections and subscriptions, not with
 * the pings it sends. It welcomes new connections (no Lambda per connect is needed for it)
 * and pings each connection every `pi` seconds (the configured default otherwise), sparing
 * a connection whose streams had a broadcast within its interval: any frame is a heartbeat
 * to AnyCable's clients. A connection found by the first read, which an earlier run may have
 * pinged just before it ended, is first pinged a quarter to half an interval later, so the
 * gap stays under the clients' two missed pings.
 */
export class Pinger {
  private readonly store: ConnectionStore;
  private readonly api: ConnectionApi;
  private readonly welcomer: Welcomer;
  private readonly history: PingerOptions['history'];
  private readonly scope: PingerOptions['scope'];
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly concurrency: number;
  private readonly defaultIntervalMs: number;
  private readonly overlapMs: number;
  private readonly lateReadEveryMs: number;
  private readonly lateWindowMs: number;
  private readonly activityMaxAgeMs: number;
  private readonly welcomeTimeoutMs: number;
  private readonly gone: GonePolicy;
  private readonly presence: PresenceStore | undefined;
  private readonly presenceExpiryEveryMs: number;
  /** When the last presence expiry began (ms). */
  private expiredAt = Number.NEGATIVE_INFINITY;
  private readonly tracked = new Map<string, Tracked>();
  private readonly streams = new Map<string, Set<string>>();
  private readonly activity = new Map<string, { lastAt: number | undefined; readAt: number }>();
  /** Connections this run is done with (gone, refused), not taken up again by a later read. */
  private readonly forgotten = new Set<string>();
  /** Start of the last read of changes; `undefined` before {@link start}. */
  private readFrom: number | undefined;
  /** Start of the last read that went back {@link PingerOptions.lateWindowMs}. */
  private lateReadAt = 0;
  private counts = { sent: 0, spared: 0, welcomed: 0, gone: 0, failed: 0, reads: 0 };

  constructor(options: PingerOptions) {
    this.store = options.store;
    this.api = options.api;
    this.welcomer = options.welcomer;
    this.history = options.history;
    this.scope = options.scope;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? noopLogger;
    this.concurrency = options.concurrency ?? 50;
    this.defaultIntervalMs = options.defaultInterval * 1000;
    this.overlapMs = options.overlapMs ?? 1000;
    this.lateReadEveryMs = options.lateReadEveryMs ?? 5000;
    this.lateWindowMs = options.lateWindowMs ?? 35_000;
    this.activityMaxAgeMs = options.activityMaxAgeMs ?? 1000;
    this.welcomeTimeoutMs = options.welcomeTimeoutMs ?? 60_000;
    this.gone = {
      store: options.store,
      sessions: options.sessions,
      clock: this.clock,
      goneGraceMs: options.goneGraceMs ?? 10_000,
      presence: options.presence,
    };
    this.presence = options.presence?.store;
    this.presenceExpiryEveryMs = options.presenceExpiryEveryMs ?? PRESENCE_EXPIRY_EVERY_MS;
    if (!(this.presenceExpiryEveryMs >= 0 && Number.isFinite(this.presenceExpiryEveryMs))) {
      throw new ConfigError('presenceExpiryEveryMs must be a finite number >= 0', {
        variable: 'presenceExpiryEveryMs',
      });
    }
    if (!(this.defaultIntervalMs > 0)) {
      throw new ConfigError('defaultInterval must be positive', { variable: 'defaultInterval' });
    }
    if (!(this.lateWindowMs < this.welcomeTimeoutMs)) {
      throw new ConfigError('lateWindowMs must be under welcomeTimeoutMs', {
        variable: 'lateWindowMs',
      });
    }
  }

  /** The first read: every connection and subscription. Then {@link tick}. */
  async start(): Promise<void> {
    this.lateReadAt = this.clock.now();
    await this.read(0, true);
  }

  /**
   * Reads what changed, then welcomes and pings what is due.
   *
   * A change is dated by its writer before it is stored, so each read goes back `overlapMs`
   * before the last one's start, and every `lateReadEveryMs` one goes back `lateWindowMs`:
   * without those, a connection stored more than `overlapMs` after it was dated would never
   * be welcomed, and its client would wait for the welcome until API Gateway's idle timeout.
   *
   * No welcome or ping starts at or after `stopAt` (ms): a run's Lambda stopped at its
   * timeout between a welcome's claim and its post would leave that welcome unsent, so the
   * last ones are left to the next run.
   */
  async tick(stopAt = Number.POSITIVE_INFINITY): Promise<void> {
    if (this.readFrom === undefined) {
      await this.start();
    } else {
      const now = this.clock.now();
      const late = now - this.lateReadAt >= this.lateReadEveryMs;
      if (late) this.lateReadAt = now;
      await this.read(this.readFrom - (late ? this.lateWindowMs : this.overlapMs), false);
    }
    await this.deliverDue(stopAt);
    await this.expirePresence();
  }

  /**
   * Removes the presence sessions of this partition's dropped connections whose TTL is over
   * (at most {@link EXPIRE_LIMIT} an expiry), on a tick at least `presenceExpiryEveryMs` after
   * the last one, or on the next tick after a full one (a backlog after a mass drop): the
   * store writes their leaves. A failure is logged; the departures stay due for the next.
   */
  private async expirePresence(): Promise<void> {
    if (!this.presence) return;
    const now = this.clock.now();
    if (now - this.expiredAt < this.presenceExpiryEveryMs) return;
    this.expiredAt = now;
    try {
      const leaves = await this.presence.expire(now, this.scope?.buckets, EXPIRE_LIMIT);
      if (leaves.length > 0) this.logger.info('presence expired', { leaves: leaves.length });
      if (leaves.length >= EXPIRE_LIMIT) this.expiredAt = Number.NEGATIVE_INFINITY;
    } catch (error) {
      this.logger.error('presence expiry failed', { error: errorMessage(error) });
    }
  }

  /** What this run did so far. */
  report(): PingReport {
    let load = 0;
    for (const t of this.tracked.values()) load += 1000 / t.intervalMs;
    return { connections: this.tracked.size, load, ...this.counts };
  }

  private async read(since: number, first: boolean): Promise<void> {
    const startedAt = this.clock.now();
    const changed: Tracked[] = [];
    for await (const page of this.store.changesSince(since, READ_PAGE, this.scope?.buckets)) {
      this.counts.reads++;
      for (const change of page) {
        const t = this.apply(change, first, startedAt);
        if (t) changed.push(t);
      }
    }
    // A connection that changed without being new lost a subscription: read its list again.
    await forEachConcurrently(changed, this.concurrency, async (t) => {
      this.counts.reads++;
      const subs = await this.store.subscriptionsOf(t.record.connectionId);
      this.streams.set(t.record.connectionId, new Set(subs.map((s) => s.stream)));
    });
    this.readFrom = startedAt;
  }

  /** Records one change; returns a known connection whose subscriptions must be read again. */
  private apply(change: ConnectionChange, first: boolean, now: number): Tracked | undefined {
    const id = change.kind === 'connection' ? change.connection : change.subscription;
    if (this.scope && !this.scope.owns(id.connectionId)) return undefined; // another partition's
    if (change.kind === 'subscription') {
      const { connectionId, stream } = change.subscription;
      if (this.forgotten.has(connectionId)) return undefined;
      const set = this.streams.get(connectionId) ?? new Set<string>();
      set.add(stream);
      this.streams.set(connectionId, set);
      return undefined;
    }
    const { connection, changedAt } = change;
    if (this.forgotten.has(connection.connectionId)) return undefined;
    const known = this.tracked.get(connection.connectionId);
    if (known) {
      if (changedAt <= known.changedAt) return undefined;
      known.changedAt = changedAt;
      return known;
    }
    const intervalMs = (connection.pingInterval ?? 0) * 1000 || this.defaultIntervalMs;
    // Found by the first read and older than the welcome timeout: an earlier run welcomed it.
    const welcomed = first && now - connection.connectedAt > this.welcomeTimeoutMs;
    this.tracked.set(connection.connectionId, {
      record: connection,
      changedAt,
      intervalMs,
      lastFrameAt: undefined,
      dueAt: welcomed ? firstPingAt(now, intervalMs) : now,
      welcomed,
      welcomeMisses: 0,
      foundFirst: first,
    });
    return undefined;
  }

  private async deliverDue(stopAt: number): Promise<void> {
    const now = this.clock.now();
    if (now >= stopAt) return;
    const due = [...this.tracked.values()].filter((t) => t.dueAt <= now);
    if (due.length === 0) return;
    const welcomes = due.filter((t) => !t.welcomed);
    const pings = due.filter((t) => t.welcomed);
    await forEachConcurrently(welcomes, this.concurrency, async (t) => {
      if (this.clock.now() < stopAt) await this.welcomeOne(t);
    });
    const active = await this.activityOf(pings, now);
    const frame = pingFrame(now);
    await forEachConcurrently(pings, this.concurrency, async (t) => {
      if (this.clock.now() >= stopAt) return;
      const lastBroadcast = active.get(t.record.connectionId);
      if (lastBroadcast !== undefined && lastBroadcast > (t.lastFrameAt ?? 0)) {
        t.lastFrameAt = lastBroadcast;
      }
      if (t.lastFrameAt !== undefined && t.lastFrameAt + t.intervalMs > now) {
        this.counts.spared++;
        t.dueAt = t.lastFrameAt + t.intervalMs;
        return;
      }
      await this.pingOne(t, frame, now);
    });
  }

  private async welcomeOne(t: Tracked): Promise<void> {
    const { connectionId } = t.record;
    const now = this.clock.now();
    try {
      if (await this.welcomer.welcome(connectionId, t.record)) {
        this.counts.welcomed++;
        t.welcomed = true;
        if (t.foundFirst) {
          // Maybe welcomed (then pinged) by an earlier run: this call posted nothing then.
          t.dueAt = firstPingAt(now, t.intervalMs);
        } else {
          t.lastFrameAt = now;
          t.dueAt = now + t.intervalMs;
        }
        if (!t.record.sid) this.forget(connectionId); // refused: disconnected and closed
        return;
      }
    } catch (error) {
      this.counts.failed++;
      this.logger.error('welcome failed', {
        connectionId,
        error: errorMessage(error),
      });
    }
    if (now - t.record.connectedAt > this.welcomeTimeoutMs) {
      this.logger.warn('welcome not delivered: the connection never became reachable', {
        connectionId,
      });
      this.forget(connectionId);
      return;
    }
    // Not reachable yet: again soon, then less often.
    t.welcomeMisses++;
    t.dueAt = now + Math.min(2000, 100 * t.welcomeMisses);
  }

  private async pingOne(t: Tracked, frame: string, now: number): Promise<void> {
    const { connectionId } = t.record;
    try {
      const result = await this.api.post(connectionId, frame, t.record.endpoint);
      if (result === 'sent') {
        this.counts.sent++;
        t.lastFrameAt = now;
        t.dueAt = now + t.intervalMs;
        return;
      }
      this.counts.gone++;
      this.forget(connectionId);
      // Usually gone after $disconnect; one read tells, else it is disconnected here.
      const stored = await this.store.getConnection(connectionId);
      if (stored) await disconnectGone(this.gone, connectionId, stored);
    } catch (error) {
      this.counts.failed++;
      t.dueAt = now + Math.min(t.intervalMs, 1000);
      this.logger.error('ping failed', {
        connectionId,
        error: errorMessage(error),
      });
    }
  }

  /** The latest broadcast time over each connection's streams, for those with one. */
  private async activityOf(due: readonly Tracked[], now: number): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (!this.history?.lastBroadcastAt) return out;
    const stale = new Set<string>();
    for (const t of due) {
      for (const s of this.streams.get(t.record.connectionId) ?? []) {
        const known = this.activity.get(s);
        if (!known || now - known.readAt > this.activityMaxAgeMs) stale.add(s);
      }
    }
    if (stale.size > 0) {
      this.counts.reads++;
      const read = await this.history.lastBroadcastAt([...stale]);
      for (const s of stale) this.activity.set(s, { lastAt: read.get(s), readAt: now });
    }
    for (const t of due) {
      let latest: number | undefined;
      for (const s of this.streams.get(t.record.connectionId) ?? []) {
        const at = this.activity.get(s)?.lastAt;
        if (at !== undefined && (latest === undefined || at > latest)) latest = at;
      }
      if (latest !== undefined) out.set(t.record.connectionId, latest);
    }
    return out;
  }

  private forget(connectionId: string): void {
    this.forgotten.add(connectionId);
    this.tracked.delete(connectionId);
    this.streams.delete(connectionId);
  }
}

/**
 * The first ping of a connection an earlier run may have pinged just before it ended: a
 * quarter to half an interval from now (spread), so the gap stays under two intervals.
 */
function firstPingAt(now: number, intervalMs: number): number {
  return now + intervalMs * (0.25 + 0.25 * Math.random());
}
