import {
  type AckState,
  type AckStore,
  type AckUpdate,
  applyAckUpdate,
  DEFAULT_ACK_TTL_SECONDS,
} from '../../messaging/ack-store.js';

/** Options of {@link MemoryAckStore}. */
export interface MemoryAckStoreOptions {
  /**
   * Seconds a state outlives its last write, as the `acks` table's TTL: an expired state
   * reads as none.
   * @default {@link DEFAULT_ACK_TTL_SECONDS} (30 days)
   */
  readonly ttlSeconds?: number;
  /** Now, in ms, for expiry. @default Date.now */
  readonly now?: () => number;
}

/** An in-memory {@link AckStore}. */
export class MemoryAckStore implements AckStore {
  private readonly states = new Map<string, { state: AckState; expiresAt: number }>();
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(options: MemoryAckStoreOptions = {}) {
    this.ttlMs = (options.ttlSeconds ?? DEFAULT_ACK_TTL_SECONDS) * 1000;
    this.now = options.now ?? Date.now;
  }

  async load(group: string, partition: string): Promise<bigint | undefined> {
    return this.live(`${group}#${partition}`)?.ackLevel;
  }

  async save(group: string, partition: string, level: bigint): Promise<void> {
    await this.commit(group, partition, { level, now: this.now() });
  }

  async loadState(group: string, partition: string): Promise<AckState | undefined> {
    const state = this.live(`${group}#${partition}`);
    return state && { ...state, holes: new Map(state.holes) };
  }

  async commit(group: string, partition: string, update: AckUpdate): Promise<AckState> {
    const key = `${group}#${partition}`;
    const next = applyAckUpdate(this.live(key), update);
    this.states.set(key, { state: next, expiresAt: update.now + this.ttlMs });
    return { ...next, holes: new Map(next.holes) };
  }

  /** States not yet expired. */
  size(): number {
    for (const key of [...this.states.keys()]) this.live(key);
    return this.states.size;
  }

  private live(key: string): AckState | undefined {
    const stored = this.states.get(key);
    if (stored && stored.expiresAt <= this.now()) {
      this.states.delete(key);
      return undefined;
    }
    return stored?.state;
  }
}
