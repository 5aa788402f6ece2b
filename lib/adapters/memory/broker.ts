import { SubscriptionTracking } from '../../broker/base.js';
import {
  activeSessionExpiry,
  describeBroker,
  historyFromRetained,
  isRetained,
  newEpoch,
  redeliveryOf,
  resolveBrokerConfig,
  type StoredMessage,
  type StreamMeta,
  toStreamMessage,
} from '../../broker/history.js';
import {
  type Broker,
  type BrokerConfig,
  type BrokerOptions,
  type Cacheable,
  defaultBrokerConfig,
  type SessionUpdate,
  type StreamMessage,
} from '../../broker/types.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { LambdacableError } from '../../kernel/errors.js';

/** Tries of {@link MemoryBroker.updateSession} before it gives up under contention. */
const SESSION_UPDATE_ATTEMPTS = 25;

interface MemorySession {
  data: Uint8Array;
  expiresAt: number;
  /** Bumped by every commit: an update writes only over the version it read. */
  version: number;
}

interface MemoryStream {
  meta: StreamMeta;
  messages: StoredMessage[];
  /** The last source position appended (see `StreamMessage.meta.sourceOffset`). */
  source?: string;
  /** When the last message was appended (ms). */
  lastAt?: number;
}

/** A broker keeping history and sessions in process memory (one node, tests, local runs). */
export class MemoryBroker extends SubscriptionTracking implements Broker {
  private readonly config: BrokerConfig;
  private readonly clock: Clock;
  private readonly streams = new Map<string, MemoryStream>();
  private readonly sessions = new Map<string, MemorySession>();

  constructor(options: BrokerOptions) {
    super(options.broadcaster);
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.clock = options.clock ?? systemClock;
  }

  async start(): Promise<void> {}

  async shutdown(): Promise<void> {}

  announce(): string {
    return describeBroker('memory', this.config);
  }

  async handleBroadcast(msg: StreamMessage): Promise<void> {
    if (msg.meta?.transient) {
      await this.broadcaster.broadcast(msg);
      return;
    }
    const now = this.clock.now();
    let stream = this.streams.get(msg.stream);
    if (!stream) {
      stream = { meta: { epoch: newEpoch(), lastOffset: 0 }, messages: [] };
      this.streams.set(msg.stream, stream);
    }
    const source = msg.meta?.sourceOffset;
    if (source !== undefined) {
      const redelivery = redeliveryOf(source, stream.source);
      if (redelivery === 'last') {
        await this.broadcaster.broadcast({
          ...msg,
          offset: stream.meta.lastOffset,
          epoch: stream.meta.epoch,
        });
        return;
      }
      // Older than the last: a duplicate if a retained message carries it, else a message
      // that never made it (redriven from the DLQ), appended now at the end.
      if (redelivery === 'older' && stream.messages.some((m) => m.source === source)) return;
      if (!redelivery) stream.source = source;
    }
    const offset = stream.meta.lastOffset + 1;
    stream.meta = { epoch: stream.meta.epoch, lastOffset: offset };
    stream.lastAt = now;
    stream.messages.push({
      offset,
      ...(source !== undefined ? { source } : {}),
      data: msg.data,
      timestamp: now,
      expiresAt: now + this.config.historyTtl * 1000,
    });
    const meta = stream.meta;
    const kept = stream.messages.filter((m) => isRetained(m, meta, this.config, now));
    stream.messages = kept;
    await this.broadcaster.broadcast({ ...msg, offset, epoch: stream.meta.epoch });
  }

  async historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]> {
    const s = this.streams.get(stream);
    return historyFromRetained(
      stream,
      s?.meta,
      epoch,
      offset,
      this.retained(s).filter((m) => m.offset > offset),
    );
  }

  async historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]> {
    const s = this.streams.get(stream);
    if (!s) return [];
    return this.retained(s)
      .filter((m) => m.timestamp >= tsSeconds * 1000)
      .map((m) => toStreamMessage(stream, s.meta.epoch, m));
  }

  async lastBroadcastAt(streams: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const name of streams) {
      const lastAt = this.streams.get(name)?.lastAt;
      if (lastAt !== undefined) out.set(name, lastAt);
    }
    return out;
  }

  async commitSession(sid: string, session: Cacheable): Promise<void> {
    const data = await session.toCacheEntry();
    this.storeSession(sid, data);
  }

  async restoreSession(sid: string): Promise<Uint8Array | null> {
    return this.liveSession(sid)?.data ?? null;
  }

  async updateSession(sid: string, update: SessionUpdate): Promise<boolean> {
    for (let attempt = 1; attempt <= SESSION_UPDATE_ATTEMPTS; attempt++) {
      // The data and its version are read together, with no await in between.
      const current = this.liveSession(sid);
      const version = current?.version ?? 0;
      const next = await update(current?.data ?? null);
      if (!next) return false;
      const data = await next.toCacheEntry();
      if ((this.sessions.get(sid)?.version ?? 0) !== version) continue;
      this.storeSession(sid, data);
      return true;
    }
    throw new LambdacableError(
      `session ${sid} was not updated: ${SESSION_UPDATE_ATTEMPTS} attempts met concurrent writes`,
    );
  }

  async finishSession(sid: string): Promise<void> {
    const session = this.sessions.get(sid);
    if (!session) return;
    session.expiresAt = this.clock.now() + this.config.sessionsTtl * 1000;
  }

  private storeSession(sid: string, data: Uint8Array): void {
    const version = (this.sessions.get(sid)?.version ?? 0) + 1;
    const expiresAt = activeSessionExpiry(this.clock.now(), this.config);
    this.sessions.set(sid, { data, expiresAt, version });
  }

  private liveSession(sid: string): MemorySession | undefined {
    const session = this.sessions.get(sid);
    if (session && session.expiresAt <= this.clock.now()) {
      this.sessions.delete(sid);
      return undefined;
    }
    return session;
  }

  private retained(s: MemoryStream | undefined): StoredMessage[] {
    if (!s) return [];
    const now = this.clock.now();
    return s.messages.filter((m) => isRetained(m, s.meta, this.config, now));
  }
}
