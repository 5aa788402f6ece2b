import {
  type AckState,
  type AckStore,
  type AckUpdate,
  applyAckUpdate,
} from '../../messaging/ack-store.js';

/** An in-memory {@link AckStore}. */
export class MemoryAckStore implements AckStore {
  private readonly states = new Map<string, AckState>();

  async load(group: string, partition: string): Promise<bigint | undefined> {
    return this.states.get(`${group}#${partition}`)?.ackLevel;
  }

  async save(group: string, partition: string, level: bigint): Promise<void> {
    await this.commit(group, partition, { level, now: Date.now() });
  }

  async loadState(group: string, partition: string): Promise<AckState | undefined> {
    const state = this.states.get(`${group}#${partition}`);
    return state && { ...state, holes: new Map(state.holes) };
  }

  async commit(group: string, partition: string, update: AckUpdate): Promise<AckState> {
    const key = `${group}#${partition}`;
    const next = applyAckUpdate(this.states.get(key), update);
    this.states.set(key, next);
    return { ...next, holes: new Map(next.holes) };
  }
}
