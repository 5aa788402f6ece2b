import { randomUUID } from 'node:crypto';
import {
  type DynamoDBClient,
  GetItemCommand,
  type QueryCommandInput,
  TransactionCanceledException,
  TransactionConflictException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { forEachConcurrently } from '../../../kernel/concurrency.js';
import { AwsResourceError, ThrottledError } from '../../../kernel/errors.js';
import {
  checkKeyBytes,
  MAX_CONNECTION_ID_BYTES,
  MAX_STREAM_BYTES,
  utf8Bytes,
} from '../../../kernel/limits.js';
import { bucketOf, MIN_BUCKETS } from '../../../realtime/keepalive/partitions.js';
import type {
  PresenceChange,
  PresenceJoin,
  PresenceLeave,
  PresenceLeft,
  PresenceMembers,
  PresenceStore,
} from '../../../realtime/presence/ports.js';
import { joinChange, storedInfo } from '../../../realtime/presence/presence.js';
import { awsCall } from '../call.js';
import { BUCKET_INDEX } from './connections.js';
import { countUpdates, readMembers } from './presence-count.js';
import {
  addSession,
  createMember,
  deleteDeparture,
  deleteRecord,
  departureKey,
  type ItemKey,
  markDropped,
  memberKey,
  putDeparture,
  putRecord,
  recordKey,
  recordStill,
  removeSession,
  type StoredMember,
  toMember,
} from './presence-items.js';
import { queryPages } from './query.js';

/** Tries of a change whose transaction is cancelled (a concurrent change of the same items). */
const MAX_ATTEMPTS = 12;
/** Why a transaction may be cancelled and tried again (`None`: another item's reason). */
const RETRIED = [
  undefined,
  'None',
  'ConditionalCheckFailed',
  'TransactionConflict',
  'ThrottlingError',
];
/** Departures expired at once, and streams dropped at once. */
const CONCURRENCY = 8;

/** Options of {@link DynamoPresenceStore}. */
export interface DynamoPresenceStoreOptions {
  readonly client: DynamoDBClient;
  /** The `connections` table (presence needs no table of its own). */
  readonly tableName: string;
  /**
   * Gives B, the number of buckets departures are written to: the pinger layout's, as
   * {@link DynamoConnectionStoreOptions.buckets}, so a pinger partition expires the departures
   * of its own connections. @default 8
   */
  readonly buckets?: () => Promise<number>;
  /**
   * The items that write a call's joins and leaves, in the transaction of the change itself:
   * the outbox `Put`s of their `PresenceEvent`s. A change and its event commit together, and
   * changes of one member one after the other. @default none: changes are written nowhere
   */
  readonly changes?: (changes: readonly PresenceChange[]) => Promise<TransactWriteItem[]>;
}

/**
 * Presence in the `connections` table, three kinds of item:
 * - a member, `pk` = `p#<stream>`, `sk` = `m#<id>`: `info` (JSON), `sessions` (connection id →
 *   0 while live, the due time in ms once dropped), never an empty map: a member exists
 *   exactly while its id is present. `members` is one Query on `pk`.
 * - a record of a live session, `pk` = `c#<connection>`, `sk` = `p#<stream>`, with the id: how
 *   `leave` and `drop` find the member (`drop`: one Query on `pk`, `sk` begins with `p#`;
 *   `removeConnection` of {@link DynamoConnectionStore} leaves these to `drop`).
 * - a departure of a dropped session, `pk` = `d#<connection>`, `sk` = `p#<stream>`, in the
 *   `byBucket` index under `bucket` = `d<n>` (n = `bucketOf(connection, B)`), `since` = its due
 *   time: `expire` is a Query per bucket for `since <= now`, never a Scan.
 *
 * Every change of a member is a transaction with the record or departure that goes with it,
 * conditioned on the state read before (the session's value and the map's size): a member and
 * its records never disagree, even when a Lambda fails half-way, and two changes at once never
 * both apply to the same state (the loser reads again and retries). So a `join` is emitted by
 * the write that created the member, a `leave` by the one that deleted it: they alternate on
 * each stream and id whatever runs at once. Every item carries `expiresAt` (TTL, 3 h after its
 * last write or due time), a safety net.
 */
export class DynamoPresenceStore implements PresenceStore {
  private readonly table: string;
  private readonly buckets: () => Promise<number>;

  constructor(private readonly options: DynamoPresenceStoreOptions) {
    this.table = options.tableName;
    this.buckets = options.buckets ?? (async () => MIN_BUCKETS);
  }

  /** Throws {@link LimitExceededError} for a stream, connection id, id or info over its limit. */
  async join(
    stream: string,
    connectionId: string,
    id: string,
    info: unknown,
    nowMs: number,
  ): Promise<PresenceJoin> {
    const infoJson = storedInfo(connectionId, id, info);
    checkKeyBytes('stream name', stream, MAX_STREAM_BYTES);
    checkKeyBytes('connection id', connectionId, MAX_CONNECTION_ID_BYTES);
    const t = this.table;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const previous = (await this.get(recordKey(connectionId, stream)))?.id as string | undefined;
      if (previous === id) {
        // The session is live (its record says so): only the info changes.
        const items = [
          recordStill(t, connectionId, stream, id),
          addSession(t, stream, id, connectionId, infoJson, nowMs),
        ];
        if (await this.transact(items, [connectionId])) return { joined: false };
        continue;
      }
      const items = [putRecord(t, connectionId, stream, id, previous, nowMs)];
      let left: string | undefined;
      if (previous !== undefined) {
        const old = await this.member(stream, previous, nowMs);
        const removal = old && removeSession(t, stream, previous, connectionId, old, nowMs);
        if (removal) items.push(removal.item);
        if (removal?.last) left = previous;
      }
      const stored = await this.get(memberKey(stream, id));
      const member = stored && live(toMember(stored), nowMs);
      items.push(
        member
          ? addSession(t, stream, id, connectionId, infoJson, nowMs)
          : createMember(t, stream, id, connectionId, infoJson, nowMs),
      );
      const changes: PresenceChange[] = [];
      if (left !== undefined) changes.push({ stream, type: 'leave', id: left });
      if (!member) changes.push(joinChange(stream, id, infoJson));
      // An expired member this join replaces is still counted: the new one takes its place.
      const counted = stored && !member ? changes.filter((c) => c.type !== 'join') : changes;
      items.push(...countUpdates(t, counted, nowMs));
      if (await this.transact(items, [connectionId], changes)) {
        return left === undefined ? { joined: !member } : { joined: !member, left };
      }
    }
    throw this.busy('join', stream, connectionId);
  }

  async leave(stream: string, connectionId: string, nowMs: number): Promise<PresenceLeft> {
    if (utf8Bytes(stream) > MAX_STREAM_BYTES || utf8Bytes(connectionId) > MAX_CONNECTION_ID_BYTES)
      return {};
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const id = (await this.get(recordKey(connectionId, stream)))?.id as string | undefined;
      if (id === undefined) return {};
      const member = await this.member(stream, id, nowMs);
      const removal = member && removeSession(this.table, stream, id, connectionId, member, nowMs);
      const items = [deleteRecord(this.table, connectionId, stream, id)];
      if (removal) items.push(removal.item);
      const changes = removal?.last ? [{ stream, type: 'leave' as const, id }] : [];
      items.push(...countUpdates(this.table, changes, nowMs));
      if (await this.transact(items, [connectionId], changes)) {
        return removal?.last ? { id, left: id } : { id };
      }
    }
    throw this.busy('leave', stream, connectionId);
  }

  /** Drops the connection's sessions a few streams at once. */
  async drop(connectionId: string, nowMs: number, ttlMs: number): Promise<string[]> {
    if (utf8Bytes(connectionId) > MAX_CONNECTION_ID_BYTES) return [];
    const bucket = bucketOf(connectionId, await this.buckets());
    const records: { stream: string; id: string }[] = [];
    for await (const items of this.query(connectionId, {
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
      ExpressionAttributeValues: { ':pk': { S: `c#${connectionId}` }, ':p': { S: 'p#' } },
      ConsistentRead: true,
    })) {
      for (const item of items) records.push({ stream: String(item.stream), id: String(item.id) });
    }
    const failures: unknown[] = [];
    await forEachConcurrently(records, CONCURRENCY, async ({ stream, id }) => {
      try {
        await this.dropOne(connectionId, stream, id, nowMs, nowMs + ttlMs, bucket);
      } catch (error) {
        failures.push(error);
      }
    });
    if (failures.length > 0) throw failures[0];
    return records.map((r) => r.stream);
  }

  private async dropOne(
    connectionId: string,
    stream: string,
    first: string,
    nowMs: number,
    dueMs: number,
    bucket: number,
  ): Promise<void> {
    let id: string | undefined = first;
    const t = this.table;
    for (let attempt = 0; attempt < MAX_ATTEMPTS && id !== undefined; attempt++) {
      const value = (await this.member(stream, id, nowMs))?.sessions[connectionId];
      const items = [deleteRecord(t, connectionId, stream, id)];
      if (value !== undefined) {
        items.push(
          markDropped(t, stream, id, connectionId, value, dueMs, nowMs),
          putDeparture(t, connectionId, stream, id, dueMs, bucket, nowMs),
        );
      }
      if (await this.transact(items, [connectionId])) return;
      id = (await this.get(recordKey(connectionId, stream)))?.id as string | undefined;
    }
    if (id !== undefined) throw this.busy('drop', stream, connectionId);
  }

  /**
   * A Query per bucket of {@link BUCKET_INDEX} (`bucket = d<n> AND since <= now`), the
   * buckets one after another until `limit` departures are read; the departures a few at
   * once. The index is eventually consistent: a departure may show up a moment late, so a
   * leave may come a moment after its time, never before. A departure that fails stays due
   * for the next call; the call throws only when none succeeded (the leaves it caused are
   * never lost to another's failure).
   */
  async expire(nowMs: number, buckets?: readonly number[], limit = 100): Promise<PresenceLeave[]> {
    const indexes = buckets ?? Array.from({ length: await this.buckets() }, (_, b) => b);
    const due: Record<string, unknown>[] = [];
    for (const b of indexes) {
      if (due.length >= limit) break;
      for await (const items of this.query(`d${b}`, {
        IndexName: BUCKET_INDEX,
        KeyConditionExpression: '#b = :b AND #t <= :now',
        ExpressionAttributeNames: { '#b': 'bucket', '#t': 'since' },
        ExpressionAttributeValues: { ':b': { S: `d${b}` }, ':now': { N: String(nowMs) } },
        Limit: limit - due.length,
      })) {
        due.push(...items.slice(0, limit - due.length));
        if (due.length >= limit) break;
      }
    }
    const leaves: PresenceLeave[] = [];
    const failures: unknown[] = [];
    await forEachConcurrently(due, CONCURRENCY, async (d) => {
      try {
        const left = await this.expireOne(
          String(d.connectionId),
          String(d.stream),
          String(d.id),
          Number(d.since),
          nowMs,
        );
        if (left) leaves.push(left);
      } catch (error) {
        failures.push(error);
      }
    });
    if (failures.length > 0 && leaves.length === 0) throw failures[0];
    return leaves;
  }

  /** Removes a due session if it still holds its due time, and its departure. */
  private async expireOne(
    connectionId: string,
    stream: string,
    id: string,
    dueMs: number,
    nowMs: number,
  ): Promise<PresenceLeave | undefined> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const member = await this.member(stream, id, nowMs);
      const items = [deleteDeparture(this.table, connectionId, stream, dueMs)];
      // Joined again since (0) or dropped again (a later due time): not this departure's.
      const removal =
        member?.sessions[connectionId] === dueMs
          ? removeSession(this.table, stream, id, connectionId, member, nowMs)
          : undefined;
      if (removal) items.push(removal.item);
      const changes = removal?.last ? [{ stream, type: 'leave' as const, id }] : [];
      items.push(...countUpdates(this.table, changes, nowMs));
      if (await this.transact(items, [connectionId], changes)) {
        return removal?.last ? { stream, id } : undefined;
      }
      const current = await this.get(departureKey(connectionId, stream));
      if (Number(current?.since) !== dueMs) return undefined; // expired by another call
    }
    throw this.busy('expire', stream, connectionId);
  }

  /**
   * The stream's first `limit` members in id order (strongly consistent), and `total`: counted
   * by reading them when they fit in one read, else by the stream's count shards
   * ({@link readMembers}): the cost of a read does not grow with the stream's members.
   */
  members(stream: string, nowMs: number, limit = 100): Promise<PresenceMembers> {
    return readMembers(this.options.client, this.table, stream, nowMs, limit);
  }

  /** A member as read now (strongly consistent); an expired one is none. */
  private async member(
    stream: string,
    id: string,
    nowMs: number,
  ): Promise<StoredMember | undefined> {
    const item = await this.get(memberKey(stream, id));
    return item && live(toMember(item), nowMs);
  }

  private async get(key: ItemKey): Promise<Record<string, unknown> | undefined> {
    const out = await awsCall('GetItem', this.table, [key.pk.S], () =>
      this.options.client.send(
        new GetItemCommand({ TableName: this.table, Key: key, ConsistentRead: true }),
      ),
    );
    return out.Item ? unmarshall(out.Item) : undefined;
  }

  /**
   * Applies `items` and the items of `changes` at once; false when cancelled because a
   * condition no longer holds or another transaction had the items (the caller reads again and
   * retries, after a pause).
   */
  private async transact(
    items: TransactWriteItem[],
    ids: readonly string[],
    changes: readonly PresenceChange[] = [],
  ): Promise<boolean> {
    if (changes.length > 0 && this.options.changes) {
      items = [...items, ...(await this.options.changes(changes))];
    }
    try {
      await awsCall('TransactWriteItems', this.table, ids, () =>
        this.options.client.send(
          // One token per attempt: the SDK's own retries of it apply it once.
          new TransactWriteItemsCommand({ TransactItems: items, ClientRequestToken: randomUUID() }),
        ),
      );
      return true;
    } catch (error) {
      const cause = error instanceof AwsResourceError ? error.cause : error;
      const cancelled =
        cause instanceof TransactionCanceledException &&
        (cause.CancellationReasons ?? []).every((r) => RETRIED.includes(r.Code));
      if (!cancelled && !(cause instanceof TransactionConflictException)) throw error;
      await new Promise((r) => setTimeout(r, Math.random() * 20));
      return false;
    }
  }

  private busy(operation: string, stream: string, connectionId: string): ThrottledError {
    return new ThrottledError(
      `presence ${operation} on ${stream} for ${connectionId}: still conflicting after ${MAX_ATTEMPTS} tries`,
      { resource: this.table, ids: [connectionId] },
    );
  }

  private query(
    id: string,
    input: Omit<QueryCommandInput, 'TableName'>,
  ): AsyncIterable<Record<string, unknown>[]> {
    return queryPages(this.options.client, this.table, id, input);
  }
}

/** The member, unless it is expired (an item its TTL has not deleted yet). */
function live(member: StoredMember, nowMs: number): StoredMember | undefined {
  return member.expiresAt >= Math.floor(nowMs / 1000) ? member : undefined;
}
