import { SessionKeeping } from '../../broker/base.js';
import {
  describeBroker,
  historyFromRetained,
  isRetained,
  newEpoch,
  redeliveryOf,
  resolveBrokerConfig,
  type StoredMessage,
  type StreamMeta,
  streamMetaExpiry,
  toStreamMessage,
} from '../../broker/history.js';
import {
  type Broker,
  type BrokerConfig,
  type BrokerOptions,
  DEFAULT_STREAM_META_TTL,
  defaultBrokerConfig,
  type SessionCache,
  type StreamMessage,
} from '../../broker/types.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { MemorySessionCache } from './sessions.js';

interface MemoryStream {
  meta: StreamMeta;
  messages: StoredMessage[];
  /** The last source position appended (see `StreamMessage.meta.sourceOffset`). */
  source?: string;
  /** When the last message was appended (ms). */
  lastAt?: number;
  /** When the stream is forgotten (ms): `streamMetaTtl` after its last append. */
  expiresAt: number;
}

/** Options of {@link MemoryBroker}. */
export interface MemoryBrokerOptions extends BrokerOptions {
  /** Where sessions live. @default a {@link MemorySessionCache} with this broker's config and clock */
  readonly sessions?: SessionCache;
}

/** A broker keeping history and sessions in process memory (one node, tests, local runs). */
export class MemoryBroker extends SessionKeeping implements Broker {
  private readonly config: BrokerConfig;
  private readonly clock: Clock;
  private readonly streams = new Map<string, MemoryStream>();
  protected readonly sessions: SessionCache;
  private readonly streamMetaTtl: number;

  constructor(options: MemoryBrokerOptions) {
    super(options.broadcaster);
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.streamMetaTtl = options.streamMetaTtl ?? DEFAULT_STREAM_META_TTL;
    this.clock = options.clock ?? systemClock;
    this.sessions =
      options.sessions ?? new MemorySessionCache({ config: this.config, clock: this.clock });
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
    let stream = this.live(msg.stream);
    if (!stream) {
      stream = { meta: { epoch: newEpoch(), lastOffset: 0 }, messages: [], expiresAt: 0 };
      this.streams.set(msg.stream, stream);
    }
    const source = msg.meta?.sourceOffset;
    if (source !== undefined) {
      const redelivery = redeliveryOf(source, stream.source);
      if (redelivery === 'last') {
        await this.broadcaster.broadcast({
          ...msg,
          meta: { ...msg.meta, redelivered: true },
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
    stream.expiresAt = streamMetaExpiry(now, this.config, this.streamMetaTtl);
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
    const s = this.live(stream);
    return historyFromRetained(
      stream,
      s?.meta,
      epoch,
      offset,
      this.retained(s).filter((m) => m.offset > offset),
    );
  }

  async historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]> {
    const s = this.live(stream);
    if (!s) return [];
    return this.retained(s)
      .filter((m) => m.timestamp >= tsSeconds * 1000)
      .map((m) => toStreamMessage(stream, s.meta.epoch, m));
  }

  /**
   * The epoch of `stream`, `undefined` before its first broadcast (AnyCable `Memory.GetEpoch`;
   * epochs are per stream here, as in the history table).
   */
  getEpoch(stream: string): string | undefined {
    return this.live(stream)?.meta.epoch;
  }

  /**
   * Sets the epoch of `stream` (AnyCable `Memory.SetEpoch`, per stream): offsets go on, and a
   * client that asks for history under the old epoch is refused and starts over. For tests
   * that need a known epoch, and for a restore from a snapshot.
   */
  setEpoch(stream: string, epoch: string): void {
    const s = this.live(stream);
    if (s) s.meta = { epoch, lastOffset: s.meta.lastOffset };
    else {
      const expiresAt = streamMetaExpiry(this.clock.now(), this.config, this.streamMetaTtl);
      this.streams.set(stream, { meta: { epoch, lastOffset: 0 }, messages: [], expiresAt });
    }
  }

  async lastBroadcastAt(streams: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const name of streams) {
      const lastAt = this.live(name)?.lastAt;
      if (lastAt !== undefined) out.set(name, lastAt);
    }
    return out;
  }

  /** The stream unless it was forgotten (its meta expired: dropped). */
  private live(name: string): MemoryStream | undefined {
    const s = this.streams.get(name);
    if (s && s.expiresAt <= this.clock.now()) {
      this.streams.delete(name);
      return undefined;
    }
    return s;
  }

  private retained(s: MemoryStream | undefined): StoredMessage[] {
    if (!s) return [];
    const now = this.clock.now();
    return s.messages.filter((m) => isRetained(m, s.meta, this.config, now));
  }
}
