import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { SessionKeeping } from '../../../broker/base.js';
import {
  describeBroker,
  newEpoch,
  redeliveryOf,
  resolveBrokerConfig,
  streamMetaExpiry,
} from '../../../broker/history.js';
import {
  type Broadcaster,
  type Broker,
  type BrokerConfig,
  DEFAULT_STREAM_META_TTL,
  defaultBrokerConfig,
  type SessionCache,
  type StreamMessage,
} from '../../../broker/types.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { type AwsResourceError, ConfigError } from '../../../kernel/errors.js';
import { awsCall } from '../call.js';
import { DynamoHistoryReader, isExpired, metaKey } from './history.js';
import { DynamoSessionCache } from './sessions.js';
import { ttlSeconds } from './ttl.js';

/** Options of {@link DynamoBroker}. */
export interface DynamoBrokerOptions {
  readonly client: DynamoDBClient;
  /** The `history` table: `pk` = stream, `sk` = offset; `sk` 0 is the stream's meta item. */
  readonly historyTable: string;
  /**
   * Where sessions live: a {@link DynamoSessionCache} shared with the fan-out (which finishes
   * the sessions of gone connections). Give it or {@link sessionsTable}.
   */
  readonly sessions?: SessionCache;
  /** The `sessions` table (`pk` = sid) to build the session cache on, when `sessions` is not given. */
  readonly sessionsTable?: string;
  readonly broadcaster: Broadcaster;
  /** @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** Drives every TTL decision. @default the system clock */
  readonly clock?: Clock;
  /**
   * Seconds a stream's meta item outlives its last append (its `expiresAt`), at least
   * `historyTtl`; an expired stream starts over with a new epoch at offset 1.
   * @default {@link DEFAULT_STREAM_META_TTL} (1 day)
   */
  readonly streamMetaTtl?: number;
}

/** Tries of an append whose transaction lost the race for the stream's counter. */
const APPEND_ATTEMPTS = 5;
/** Streams whose meta item an instance remembers from its own last append. */
const META_CACHE_STREAMS = 10_000;

/**
 * The broker on DynamoDB: per-stream meta item (epoch created first-writer-wins by
 * `if_not_exists`, atomic last-offset counter, `lastAt` ms of the last append, `expiresAt`
 * `streamMetaTtl` after it), message items with `expiresAt`, sessions with TTL. Reads filter
 * on `expiresAt`, since TTL deletion lags; an append to a stream whose meta item expired
 * starts it over (new epoch, offset 1), as if the item were gone.
 */
export class DynamoBroker extends SessionKeeping implements Broker {
  private readonly config: BrokerConfig;
  private readonly clock: Clock;
  private readonly client: DynamoDBClient;
  protected readonly sessions: SessionCache;
  private readonly history: DynamoHistoryReader;
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
    this.sessions = options.sessions ?? this.sessionCache(options.sessionsTable);
    this.history = new DynamoHistoryReader({
      client: this.client,
      tableName: options.historyTable,
      config: this.config,
      clock: this.clock,
    });
  }

  private sessionCache(tableName: string | undefined): SessionCache {
    if (!tableName) {
      throw new ConfigError('DynamoBroker needs sessions or sessionsTable', {
        variable: 'sessionsTable',
      });
    }
    return new DynamoSessionCache({
      client: this.client,
      tableName,
      config: this.config,
      clock: this.clock,
    });
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
    const meta = await this.nextOffset(msg.stream, now);
    const offset = Number(meta.Attributes?.lastOffset?.N);
    const epoch = meta.Attributes?.epoch?.S ?? '';
    await awsCall('PutItem', table, [msg.stream], () =>
      this.client.send(
        new PutItemCommand({ TableName: table, Item: this.messageItem(msg, offset, now) }),
      ),
    );
    await this.appended(msg, offset, epoch);
  }

  /**
   * Takes the stream's next offset: the counter of a live meta item (or a new one) goes up
   * by one; a meta item past its `expiresAt` (not deleted yet) is replaced by a new epoch at
   * offset 1, on the condition that it is still expired (else another writer renewed it:
   * count on it).
   */
  private async nextOffset(stream: string, now: number) {
    const table = this.options.historyTable;
    const values = {
      ':one': 1,
      ':epoch': newEpoch(),
      ':now': now,
      ':nowSeconds': now / 1000,
      ':expires': this.metaExpiresAt(now),
    };
    // A live meta item counts on; one past its TTL (not deleted yet) is replaced: new epoch.
    const attempts = [
      {
        UpdateExpression:
          'SET lastOffset = if_not_exists(lastOffset, :zero) + :one, epoch = if_not_exists(epoch, :epoch), lastAt = :now, expiresAt = :expires',
        ConditionExpression: 'attribute_not_exists(expiresAt) OR expiresAt > :nowSeconds',
        ExpressionAttributeValues: marshall({ ...values, ':zero': 0 }),
      },
      {
        UpdateExpression:
          'SET lastOffset = :one, epoch = :epoch, lastAt = :now, expiresAt = :expires REMOVE #source',
        ConditionExpression: 'expiresAt <= :nowSeconds',
        ExpressionAttributeNames: { '#source': 'source' },
        ExpressionAttributeValues: marshall(values),
      },
    ];
    for (let attempt = 1; ; attempt++) {
      for (const update of attempts) {
        try {
          return await awsCall('UpdateItem', table, [stream], () =>
            this.client.send(
              new UpdateItemCommand({
                TableName: table,
                Key: metaKey(stream),
                ReturnValues: 'ALL_NEW',
                ...update,
              }),
            ),
          );
        } catch (error) {
          if (!isConditionFailure(error) || attempt >= APPEND_ATTEMPTS) throw error;
        }
      }
    }
  }

  /** The `expiresAt` (seconds) of a meta item appended to at `now`. */
  private metaExpiresAt(now: number): number {
    return ttlSeconds(
      streamMetaExpiry(now, this.config, this.options.streamMetaTtl ?? DEFAULT_STREAM_META_TTL),
    );
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
        : await awsCall('GetItem', table, [msg.stream], () =>
            this.client.send(
              new GetItemCommand({
                TableName: table,
                Key: metaKey(msg.stream),
                ConsistentRead: true,
              }),
            ),
          );
      const now = this.clock.now();
      // A meta item past its TTL that DynamoDB has not deleted yet: the stream starts over.
      const expired = current.Item !== undefined && isExpired(current.Item, now);
      const item = expired ? undefined : current.Item;
      const last = Number(item?.lastOffset?.N ?? '0');
      const epoch = item?.epoch?.S ?? newEpoch();
      const stored = sourceOf(item);
      const redelivery = redeliveryOf(source, stored);
      if (redelivery === 'last') {
        const meta = { ...msg.meta, redelivered: true };
        await this.broadcaster.broadcast({ ...msg, meta, offset: last, epoch });
      }
      if (redelivery === 'last') return;
      // Older than the last appended: a duplicate if a retained message carries it, else a
      // message that never made it (redriven from the DLQ), appended now at the end.
      if (redelivery === 'older' && (await this.history.hasSource(msg.stream, source, last)))
        return;
      const offset = last + 1;
      try {
        await awsCall('TransactWriteItems', table, [msg.stream], () =>
          this.client.send(
            new TransactWriteItemsCommand({
              TransactItems: [
                {
                  Update: {
                    TableName: table,
                    Key: metaKey(msg.stream),
                    UpdateExpression:
                      'SET lastOffset = :offset, epoch = :epoch, #source = :source, lastAt = :now, expiresAt = :expires',
                    ConditionExpression: item
                      ? 'lastOffset = :last AND (attribute_not_exists(expiresAt) OR expiresAt > :nowSeconds)'
                      : expired
                        ? 'expiresAt <= :nowSeconds'
                        : 'attribute_not_exists(lastOffset)',
                    ExpressionAttributeNames: { '#source': 'source' },
                    ExpressionAttributeValues: {
                      ...marshall({
                        ':offset': offset,
                        ':epoch': epoch,
                        ':now': now,
                        ':expires': this.metaExpiresAt(now),
                        ...(item || expired ? { ':nowSeconds': now / 1000 } : {}),
                        ...(item ? { ':last': last } : {}),
                      }),
                      // The stream's source position only moves forward. A string: a stream
                      // sequence number can be longer than a DynamoDB number's 38 digits.
                      ':source': { S: redelivery === 'older' ? stored! : source },
                    },
                  },
                },
                {
                  Put: {
                    TableName: table,
                    Item: { ...this.messageItem(msg, offset, now), source: { S: source } },
                  },
                },
              ],
            }),
          ),
        );
      } catch (error) {
        this.metaCache.delete(msg.stream);
        // Another writer moved the counter between the read and the write: read again.
        const raced = error instanceof Error && error.cause instanceof TransactionCanceledException;
        if (raced && attempt < APPEND_ATTEMPTS) continue;
        throw error;
      }
      this.remember(msg.stream, {
        ...metaKey(msg.stream),
        ...marshall({ lastOffset: offset, epoch, expiresAt: this.metaExpiresAt(now) }),
        source: { S: redelivery === 'older' ? stored! : source },
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

  /** A message item: `ts` in ms, `expiresAt` in seconds (DynamoDB TTL). */
  private messageItem(msg: StreamMessage, offset: number, now: number) {
    const expiresAt = ttlSeconds(now + this.config.historyTtl * 1000);
    return marshall({ pk: msg.stream, sk: offset, data: msg.data, ts: now, expiresAt });
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
            Key: marshall({ pk: msg.stream, sk: evicted }),
          }),
        )
        .catch(() => undefined);
    }
    await this.broadcaster.broadcast({ ...msg, offset, epoch });
  }

  async historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]> {
    return this.history.historyFrom(stream, epoch, offset);
  }

  async historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]> {
    return this.history.historySince(stream, tsSeconds);
  }

  async lastBroadcastAt(streams: readonly string[]): Promise<Map<string, number>> {
    return this.history.lastBroadcastAt(streams);
  }
}

function isConditionFailure(error: unknown): boolean {
  return (error as AwsResourceError).cause instanceof ConditionalCheckFailedException;
}

/**
 * The source position an item holds: a string since it may be longer than 38 digits; an
 * item an older release wrote holds it as a number.
 */
function sourceOf(item: Record<string, AttributeValue> | undefined): string | undefined {
  return item?.source?.S ?? item?.source?.N;
}
