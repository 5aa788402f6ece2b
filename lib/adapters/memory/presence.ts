import { bucketOf, MIN_BUCKETS } from '../../realtime/keepalive/partitions.js';
import type {
  PresenceChange,
  PresenceJoin,
  PresenceLeave,
  PresenceLeft,
  PresenceMembers,
  PresenceStore,
} from '../../realtime/presence/ports.js';
import { compareIds, joinChange, storedInfo } from '../../realtime/presence/presence.js';

/** A member: its info (JSON) and sessions, connection id → 0 when live, else when due (ms). */
interface Member {
  infoJson: string | undefined;
  readonly sessions: Map<string, number>;
}

/** A dropped session waiting for its time. */
interface Departure {
  readonly connectionId: string;
  readonly stream: string;
  readonly id: string;
  readonly due: number;
  readonly bucket: number;
}

/**
 * An in-memory {@link PresenceStore}, with the DynamoDB store's semantics. Each method
 * changes its state without awaiting in between, so calls at once are atomic.
 */
export class MemoryPresenceStore implements PresenceStore {
  /** Stream → id → member. */
  private readonly streams = new Map<string, Map<string, Member>>();
  /** Connection → stream → the id of its live session there. */
  private readonly records = new Map<string, Map<string, string>>();
  /** `<connection>\n<stream>` → its departure. */
  private readonly departures = new Map<string, Departure>();
  private readonly buckets: () => Promise<number> | number;
  private readonly onChange: (changes: readonly PresenceChange[]) => void;

  /**
   * `buckets` is B for departures (as the DynamoDB store's option; it must never shrink), 8 by
   * default. `onChange` gets each call's changes (joins and leaves) as the call makes them,
   * before it resolves, in the order of the changes (the DynamoDB store's outbox).
   */
  constructor(
    options: {
      buckets?: () => Promise<number> | number;
      onChange?: (changes: readonly PresenceChange[]) => void;
    } = {},
  ) {
    this.buckets = options.buckets ?? (() => MIN_BUCKETS);
    const onChange = options.onChange;
    this.onChange = (changes) => {
      if (onChange && changes.length > 0) onChange(changes);
    };
  }

  async join(
    stream: string,
    connectionId: string,
    id: string,
    info: unknown,
    _nowMs: number,
  ): Promise<PresenceJoin> {
    const infoJson = storedInfo(connectionId, id, info);
    const previous = this.records.get(connectionId)?.get(stream);
    const left =
      previous !== undefined && previous !== id && this.remove(stream, previous, connectionId)
        ? previous
        : undefined;
    const members = this.streams.get(stream) ?? new Map<string, Member>();
    this.streams.set(stream, members);
    const member = members.get(id) ?? { infoJson, sessions: new Map<string, number>() };
    const joined = !members.has(id);
    members.set(id, member);
    member.infoJson = infoJson;
    member.sessions.set(connectionId, 0);
    const records = this.records.get(connectionId) ?? new Map<string, string>();
    this.records.set(connectionId, records);
    records.set(stream, id);
    this.onChange([
      ...(left === undefined ? [] : [{ stream, type: 'leave' as const, id: left }]),
      ...(joined ? [joinChange(stream, id, infoJson)] : []),
    ]);
    return left === undefined ? { joined } : { joined, left };
  }

  async leave(stream: string, connectionId: string, _nowMs: number): Promise<PresenceLeft> {
    const records = this.records.get(connectionId);
    const id = records?.get(stream);
    if (id === undefined) return {};
    records?.delete(stream);
    if (records?.size === 0) this.records.delete(connectionId);
    if (!this.remove(stream, id, connectionId)) return { id };
    this.onChange([{ stream, type: 'leave', id }]);
    return { id, left: id };
  }

  async drop(connectionId: string, nowMs: number, ttlMs: number): Promise<string[]> {
    const bucket = bucketOf(connectionId, await this.buckets());
    const records = this.records.get(connectionId);
    this.records.delete(connectionId);
    const due = nowMs + ttlMs;
    const streams: string[] = [];
    for (const [stream, id] of records ?? []) {
      streams.push(stream);
      const sessions = this.streams.get(stream)?.get(id)?.sessions;
      if (!sessions?.has(connectionId)) continue;
      sessions.set(connectionId, due);
      this.departures.set(`${connectionId}\n${stream}`, { connectionId, stream, id, due, bucket });
    }
    return streams;
  }

  async expire(nowMs: number, buckets?: readonly number[], limit = 100): Promise<PresenceLeave[]> {
    const read = buckets === undefined ? undefined : new Set(buckets);
    const due = [...this.departures.entries()]
      .filter(([, d]) => d.due <= nowMs && (!read || read.has(d.bucket)))
      .sort(([, a], [, b]) => a.due - b.due)
      .slice(0, limit);
    const leaves: PresenceLeave[] = [];
    for (const [key, d] of due) {
      this.departures.delete(key);
      if (this.remove(d.stream, d.id, d.connectionId, d.due)) {
        leaves.push({ stream: d.stream, id: d.id });
      }
    }
    this.onChange(leaves.map(({ stream, id }) => ({ stream, type: 'leave' as const, id })));
    return leaves;
  }

  async members(stream: string, _nowMs: number, limit = 100): Promise<PresenceMembers> {
    const members = [...(this.streams.get(stream) ?? new Map<string, Member>()).entries()];
    const records = members
      .sort(([a], [b]) => compareIds(a, b))
      .slice(0, limit)
      .map(([id, m]) => ({
        id,
        info: m.infoJson === undefined ? undefined : JSON.parse(m.infoJson),
      }));
    return { total: members.length, records };
  }

  /**
   * Removes the connection's session from a member (only while it holds `expected`, when
   * given); whether that was its last, so the member is gone.
   */
  private remove(stream: string, id: string, connectionId: string, expected?: number): boolean {
    const members = this.streams.get(stream);
    const sessions = members?.get(id)?.sessions;
    const value = sessions?.get(connectionId);
    if (!sessions || value === undefined) return false;
    if (expected !== undefined && value !== expected) return false;
    sessions.delete(connectionId);
    if (sessions.size > 0) return false;
    members?.delete(id);
    if (members?.size === 0) this.streams.delete(stream);
    return true;
  }
}
