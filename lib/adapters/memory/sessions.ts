import {
  activeSessionExpiry,
  resolveBrokerConfig,
  SESSION_UPDATE_ATTEMPTS,
} from '../../broker/history.js';
import {
  type BrokerConfig,
  type Cacheable,
  defaultBrokerConfig,
  type SessionCache,
  type SessionUpdate,
} from '../../broker/types.js';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { LambdacableError } from '../../kernel/errors.js';

interface MemorySession {
  data: Uint8Array;
  /** ms since the epoch. */
  expiresAt: number;
  /** Bumped by every commit: an update writes only over the version it read. */
  version: number;
}

/** Options of {@link MemorySessionCache}. */
export interface MemorySessionCacheOptions {
  /** Only `sessionsTtl` is used. @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** Drives every TTL decision. @default the system clock */
  readonly clock?: Clock;
}

/** A {@link SessionCache} in process memory (one node, tests, local runs). */
export class MemorySessionCache implements SessionCache {
  private readonly config: BrokerConfig;
  private readonly clock: Clock;
  private readonly sessions = new Map<string, MemorySession>();

  constructor(options: MemorySessionCacheOptions = {}) {
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.clock = options.clock ?? systemClock;
  }

  async commitSession(sid: string, session: Cacheable): Promise<void> {
    this.store(sid, await session.toCacheEntry());
  }

  async restoreSession(sid: string): Promise<Uint8Array | null> {
    return this.live(sid)?.data ?? null;
  }

  async updateSession(sid: string, update: SessionUpdate): Promise<boolean> {
    for (let attempt = 1; attempt <= SESSION_UPDATE_ATTEMPTS; attempt++) {
      const current = this.live(sid);
      const version = current?.version ?? 0;
      const next = await update(current?.data ?? null);
      if (!next) return false;
      const data = await next.toCacheEntry();
      if ((this.sessions.get(sid)?.version ?? 0) !== version) continue;
      this.store(sid, data);
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

  private store(sid: string, data: Uint8Array): void {
    const version = (this.sessions.get(sid)?.version ?? 0) + 1;
    const expiresAt = activeSessionExpiry(this.clock.now(), this.config);
    this.sessions.set(sid, { data, expiresAt, version });
  }

  private live(sid: string): MemorySession | undefined {
    const session = this.sessions.get(sid);
    if (session && session.expiresAt <= this.clock.now()) {
      this.sessions.delete(sid);
      return undefined;
    }
    return session;
  }
}
