import { randomUUID } from 'node:crypto';
import {
  type AttributeValue,
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  paginateQuery,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { SubscriptionTracking } from '../../../broker/base.js';
import {
  activeSessionExpiry,
  describeBroker,
  historyFromRetained,
  lowestRetainedOffset,
  newEpoch,
  redeliveryOf,
  resolveBrokerConfig,
  type StoredMessage,
  type StreamMeta,
  toStreamMessage,
} from '../../../broker/history.js';
import {
  type Broadcaster,
  type Broker,
  type BrokerConfig,
  type Cacheable,
  defaultBrokerConfig,
  type SessionUpdate,
  type StreamMessage,
} from '../../../broker/types.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { AwsResourceError } from '../../../kernel/errors.js';
import { MAX_STREAM_BYTES, utf8Bytes } from '../../../kernel/limits.js';

/** Options of {@link DynamoBroker}. */
export interface DynamoBrokerOptions {
  readonly client: DynamoDBClient;
  /** The `history` table: `pk` = stream, `sk` = offset; `sk` 0 is the stream's meta item. */
  readonly historyTable: string;
  /** The `sessions` table: `pk` = sid. */
  readonly sessionsTable: string;
  readonly broadcaster: Broadcaster;
  /** @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** Drives every TTL decision. @default the system clock */
  readonly clock?: Clock;
}

const META = '0';
/** Keys per BatchGetItem, the DynamoDB maximum. */
const BATCH_GET_KEYS = 100;
/** Streams whose meta item an instance remembers from its own last append. */
const META_CACHE_STREAMS = 10_000;
/** Tries of {@link DynamoBroker.updateSession} before it gives up under contention. */
const SESSION_UPDATE_ATTEMPTS = 25;

/**
 * The broker on DynamoDB: per-stream meta item (epoch created first-writer-wins by
 * `if_not_exists`, atomic last-offset counter, `lastAt` ms of the last append), message
 * items with `expiresAt`, sessions with TTL. Reads filter on `expiresAt`, since TTL
 * deletion lags.
 */
export class DynamoBroker extends SubscriptionTracking implements Broker {
  private readonly config: BrokerConfig;
  private readonly clock: Clock;
  private readonly client: DynamoDBClient;
  /**
   * The meta item each stream has after this instance's last append to it, so that the next
   * append needs no read: the append's transaction is conditioned on that counter, so a
   * stale entry (another instance appended since) only costs a failed write and a read.
   */
  private readonly metaCache = new Map<string, Record<string, AttributeValue>>();

  constructor(private readonly options: DynamoBrokerOptions) {
    super(options.broadcaster);
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.clock = options.clock ?? systemClock;
    this.client = options.client;
  }

  async start(): Promise<void> {}

  async shutdown(): Promise<void> {}

  announce(): string {
    return describeBroker('DynamoDB', this.config);
  }

  async handleBroadcast(msg: StreamMessage): Promise<void> {
    if (msg.meta?.transient) {
      await this.broadcaster.broadcast(msg);
      return;
    }
    if (msg.meta?.sourceOffset !== undefined) {
      await this.appendOnce(msg, msg.meta.sourceOffset);
      return;
    }
    const now = this.clock.now();
    const table = this.options.historyTable;
    this.metaCache.delete(msg.stream);
    const meta = await this.call('UpdateItem', table, msg.stream, () =>
      this.client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: { pk: { S: msg.stream }, sk: { N: META } },
          UpdateExpression:
            'SET lastOffset = if_not_exists(lastOffset, :zero) + :one, epoch = if_not_exists(epoch, :epoch), lastAt = :now',
          ExpressionAttributeValues: {
            ':zero': { N: '0' },
            ':one': { N: '1' },
            ':epoch': { S: newEpoch() },
            ':now': { N: String(now) },
          },
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    const offset = Number(meta.Attributes?.lastOffset?.N);
    const epoch = meta.Attributes?.epoch?.S ?? '';
    await this.call('PutItem', table, msg.stream, () =>
      this.client.send(
        new PutItemCommand({ TableName: table, Item: this.messageItem(msg, offset, now) }),
      ),
    );
    await this.appended(msg, offset, epoch);
  }

  /**
   * Appends a message with a source position exactly once: the counter, the source
   * position and the message are written in one transaction conditioned on the counter
   * read before, so a crash leaves neither a gap nor a second copy, and a redelivery is
   * recognised by its source position.
   */
  private async appendOnce(msg: StreamMessage, source: string): Promise<void> {
    const table = this.options.historyTable;
    for (let attempt = 1; ; attempt++) {
      const cached = attempt === 1 ? this.metaCache.get(msg.stream) : undefined;
      const current = cached
        ? { Item: cached }
        : await this.call('GetItem', table, msg.stream, () =>
            this.client.send(
              new GetItemCommand({
                TableName: table,
                Key: { pk: { S: msg.stream }, sk: { N: META } },
                ConsistentRead: true,
              }),
            ),
          );
      const last = Number(current.Item?.lastOffset?.N ?? '0');
      const epoch = current.Item?.epoch?.S ?? newEpoch();
      const stored = current.Item?.source?.N;
      const redelivery = redeliveryOf(source, stored);
      if (redelivery === 'last') await this.broadcaster.broadcast({ ...msg, offset: last, epoch });
      if (redelivery === 'last') return;
      // Older than the last appended: a duplicate if a retained message carries it, else a
      // message that never made it (redriven from the DLQ), appended now at the end.
      if (redelivery === 'older' && (await this.hasSource(msg.stream, source, last))) return;
      const offset = last + 1;
      const now = this.clock.now();
      try {
        await this.client.send(
          new TransactWriteItemsCommand({
            TransactItems: [
              {
                Update: {
                  TableName: table,
                  Key: { pk: { S: msg.stream }, sk: { N: META } },
                  UpdateExpression:
                    'SET lastOffset = :offset, epoch = :epoch, #source = :source, lastAt = :now',
                  ConditionExpression: current.Item
                    ? 'lastOffset = :last'
                    : 'attribute_not_exists(lastOffset)',
                  ExpressionAttributeNames: { '#source': 'source' },
                  ExpressionAttributeValues: {
                    ':offset': { N: String(offset) },
                    ':epoch': { S: epoch },
                    // The stream's source position only moves forward.
                    ':source': { N: redelivery === 'older' ? stored! : source },
                    ':now': { N: String(now) },
                    ...(current.Item ? { ':last': { N: String(last) } } : {}),
                  },
                },
              },
              {
                Put: {
                  TableName: table,
                  Item: { ...this.messageItem(msg, offset, now), source: { N: source } },
                },
              },
            ],
          }),
        );
      } catch (error) {
        this.metaCache.delete(msg.stream);
        // Another writer moved the counter between the read and the write: read again.
        if (error instanceof TransactionCanceledException && attempt < 5) continue;
        throw new AwsResourceError(
          `TransactWriteItems on ${table} failed for ${msg.stream}: ${(error as Error).name}`,
          { resource: table, ids: [msg.stream], cause: error },
        );
      }
      this.remember(msg.stream, {
        pk: { S: msg.stream },
        sk: { N: META },
        lastOffset: { N: String(offset) },
        epoch: { S: epoch },
        source: { N: redelivery === 'older' ? stored! : source },
      });
      await this.appended(msg, offset, epoch);
      return;
    }
  }

  private remember(stream: string, item: Record<string, AttributeValue>): void {
    this.metaCache.delete(stream);
    this.metaCache.set(stream, item);
    if (this.metaCache.size > META_CACHE_STREAMS) {
      this.metaCache.delete(this.metaCache.keys().next().value!);
    }
  }

  private messageItem(msg: StreamMessage, offset: number, now: number) {
    return {
      pk: { S: msg.stream },
      sk: { N: String(offset) },
      data: { S: msg.data },
      ts: { N: String(now) },
      expiresAt: { N: String((now + this.config.historyTtl * 1000) / 1000) },
    };
  }

  /** Evicts the message the limit pushed out, then broadcasts the appended one. */
  private async appended(msg: StreamMessage, offset: number, epoch: string): Promise<void> {
    const table = this.options.historyTable;
    const evicted = offset - this.config.historyLimit;
    if (evicted > 0) {
      // Best effort: reads ignore messages beyond the limit anyway.
      await this.client
        .send(
          new DeleteItemCommand({
            TableName: table,
            Key: { pk: { S: msg.stream }, sk: { N: String(evicted) } },
          }),
        )
        .catch(() => undefined);
    }
    await this.broadcaster.broadcast({ ...msg, offset, epoch });
  }

  async historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]> {
    const meta = await this.meta(stream);
    if (!meta || meta.epoch !== epoch || offset >= meta.lastOffset) {
      return historyFromRetained(stream, meta, epoch, offset, []);
    }
    const from = Math.max(offset + 1, lowestRetainedOffset(meta, this.config));
    const retained = await this.retained(stream, meta, from);
    return historyFromRetained(stream, meta, epoch, offset, retained);
  }

  async historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]> {
    const meta = await this.meta(stream);
    if (!meta) return [];
    const retained = await this.retained(stream, meta, lowestRetainedOffset(meta, this.config));
    return retained
      .filter((m) => m.timestamp >= tsSeconds * 1000)
      .map((m) => toStreamMessage(stream, meta.epoch, m));
  }

  /**
   * The streams' `lastAt` from their meta items: BatchGetItem, 100 keys a request,
   * eventually consistent (the pinger reads again after a while anyway). Keys DynamoDB
   * leaves unprocessed are asked again with back-off; a stream still unread after that is
   * left out, as if it had no broadcast (its subscribers are pinged).
   */
  async lastBroadcastAt(streams: readonly string[]): Promise<Map<string, number>> {
    const table = this.options.historyTable;
    const out = new Map<string, number>();
    // BatchGetItem refuses duplicate keys; a name over the limit was never appended.
    const names = [...new Set(streams)].filter((s) => s !== '' && utf8Bytes(s) <= MAX_STREAM_BYTES);
    for (let i = 0; i < names.length; i += BATCH_GET_KEYS) {
      const chunk = names.slice(i, i + BATCH_GET_KEYS);
      const id = chunk.length > 1 ? `${chunk[0]} and ${chunk.length - 1} more` : String(chunk[0]);
      let keys: Record<string, AttributeValue>[] = chunk.map((stream) => ({
        pk: { S: stream },
        sk: { N: META },
      }));
      for (let attempt = 0; keys.length > 0 && attempt < 8; attempt++) {
        const request = keys;
        const res = await this.call('BatchGetItem', table, id, () =>
          this.client.send(
            new BatchGetItemCommand({
              RequestItems: {
                [table]: {
                  Keys: request,
                  ProjectionExpression: 'pk, lastAt',
                  ConsistentRead: false,
                },
              },
            }),
          ),
        );
        for (const item of res.Responses?.[table] ?? []) {
          const stream = item.pk?.S;
          const lastAt = item.lastAt?.N;
          if (stream !== undefined && lastAt !== undefined) out.set(stream, Number(lastAt));
        }
        keys = res.UnprocessedKeys?.[table]?.Keys ?? [];
        if (keys.length > 0) await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
      }
    }
    return out;
  }

  async commitSession(sid: string, session: Cacheable): Promise<void> {
    const data = await session.toCacheEntry();
    const expiresAt = activeSessionExpiry(this.clock.now(), this.config) / 1000;
    await this.call('PutItem', this.options.sessionsTable, sid, () =>
      this.client.send(
        new PutItemCommand({
          TableName: this.options.sessionsTable,
          Item: this.sessionItem(sid, data, expiresAt),
        }),
      ),
    );
  }

  async restoreSession(sid: string): Promise<Uint8Array | null> {
    return (await this.readSession(sid)).data;
  }

  /**
   * Optimistic concurrency on the session item's `version`, a token every write replaces:
   * the write is conditioned on the version read, and a write that lost the race reads
   * again and retries.
   */
  async updateSession(sid: string, update: SessionUpdate): Promise<boolean> {
    const table = this.options.sessionsTable;
    for (let attempt = 1; ; attempt++) {
      const current = await this.readSession(sid);
      const next = await update(current.data);
      if (!next) return false;
      const data = await next.toCacheEntry();
      const expiresAt = activeSessionExpiry(this.clock.now(), this.config) / 1000;
      try {
        await this.client.send(
          new PutItemCommand({
            TableName: table,
            Item: this.sessionItem(sid, data, expiresAt),
            ConditionExpression:
              current.version === undefined ? 'attribute_not_exists(#version)' : '#version = :v',
            ExpressionAttributeNames: { '#version': 'version' },
            ...(current.version === undefined
              ? {}
              : { ExpressionAttributeValues: { ':v': { S: current.version } } }),
          }),
        );
        return true;
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException && attempt < SESSION_UPDATE_ATTEMPTS) {
          // Spreads writers that keep colliding (a client subscribing to many streams at once).
          await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
          continue;
        }
        throw new AwsResourceError(
          `PutItem on ${table} failed for ${sid} after ${attempt} attempts: ${(error as Error).name}`,
          { resource: table, ids: [sid], cause: error },
        );
      }
    }
  }

  /** A session item with a new version token. */
  private sessionItem(sid: string, data: Uint8Array, expiresAt: number) {
    return {
      pk: { S: sid },
      data: { B: data },
      expiresAt: { N: String(expiresAt) },
      version: { S: randomUUID() },
    };
  }

  /** The live session's data (`null` when unknown or expired) and the item's version. */
  private async readSession(sid: string): Promise<{ data: Uint8Array | null; version?: string }> {
    const out = await this.call('GetItem', this.options.sessionsTable, sid, () =>
      this.client.send(
        new GetItemCommand({
          TableName: this.options.sessionsTable,
          Key: { pk: { S: sid } },
          ConsistentRead: true,
        }),
      ),
    );
    const item = out.Item;
    const data = item?.data?.B;
    const version = item?.version?.S;
    const live = data !== undefined && Number(item?.expiresAt?.N) * 1000 > this.clock.now();
    return { data: live ? data : null, ...(version === undefined ? {} : { version }) };
  }

  async finishSession(sid: string): Promise<void> {
    const expiresAt = (this.clock.now() + this.config.sessionsTtl * 1000) / 1000;
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.options.sessionsTable,
          Key: { pk: { S: sid } },
          UpdateExpression: 'SET expiresAt = :e',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':e': { N: String(expiresAt) } },
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return;
      throw new AwsResourceError(`UpdateItem on ${this.options.sessionsTable} failed for ${sid}`, {
        resource: this.options.sessionsTable,
        ids: [sid],
        cause: error,
      });
    }
  }

  private async meta(stream: string): Promise<StreamMeta | undefined> {
    const out = await this.call('GetItem', this.options.historyTable, stream, () =>
      this.client.send(
        new GetItemCommand({
          TableName: this.options.historyTable,
          Key: { pk: { S: stream }, sk: { N: META } },
          ConsistentRead: true,
        }),
      ),
    );
    const epoch = out.Item?.epoch?.S;
    if (!epoch) return undefined;
    return { epoch, lastOffset: Number(out.Item?.lastOffset?.N ?? '0') };
  }

  /** Whether one of the stream's retained messages was appended from `source`. */
  private async hasSource(stream: string, source: string, last: number): Promise<boolean> {
    const table = this.options.historyTable;
    const out = await this.call('Query', table, stream, () =>
      this.client.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :s AND sk BETWEEN :from AND :to',
          FilterExpression: '#source = :source',
          ExpressionAttributeNames: { '#source': 'source' },
          ExpressionAttributeValues: {
            ':s': { S: stream },
            ':from': { N: String(Math.max(1, last - this.config.historyLimit + 1)) },
            ':to': { N: String(last) },
            ':source': { N: source },
          },
          ConsistentRead: true,
        }),
      ),
    );
    return (out.Items?.length ?? 0) > 0;
  }

  private async retained(stream: string, meta: StreamMeta, from: number): Promise<StoredMessage[]> {
    const out: StoredMessage[] = [];
    const pages = paginateQuery(
      { client: this.client },
      {
        TableName: this.options.historyTable,
        KeyConditionExpression: 'pk = :s AND sk BETWEEN :from AND :to',
        FilterExpression: 'expiresAt > :now',
        ExpressionAttributeValues: {
          ':s': { S: stream },
          ':from': { N: String(from) },
          ':to': { N: String(meta.lastOffset) },
          ':now': { N: String(this.clock.now() / 1000) },
        },
        ConsistentRead: true,
      },
    );
    try {
      for await (const page of pages) {
        for (const item of page.Items ?? []) {
          out.push({
            offset: Number(item.sk?.N),
            data: item.data?.S ?? '',
            timestamp: Number(item.ts?.N),
            expiresAt: Number(item.expiresAt?.N) * 1000,
          });
        }
      }
    } catch (cause) {
      throw new AwsResourceError(`Query on ${this.options.historyTable} failed for ${stream}`, {
        resource: this.options.historyTable,
        ids: [stream],
        cause,
      });
    }
    return out;
  }

  private async call<T>(op: string, table: string, id: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (cause) {
      throw new AwsResourceError(`${op} on ${table} failed for ${id}`, {
        resource: table,
        ids: [id],
        cause,
      });
    }
  }
}
