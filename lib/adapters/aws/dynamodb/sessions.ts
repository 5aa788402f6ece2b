import { randomUUID } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  activeSessionExpiry,
  resolveBrokerConfig,
  SESSION_UPDATE_ATTEMPTS,
} from '../../../broker/history.js';
import {
  type BrokerConfig,
  type Cacheable,
  defaultBrokerConfig,
  type SessionCache,
  type SessionUpdate,
} from '../../../broker/types.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { awsCall } from '../call.js';
import { ttlSeconds } from './ttl.js';

/** The most a writer that lost a race waits before it reads again, per attempt (ms). */
const SESSION_RETRY_JITTER_MS = 5;

/** Options of {@link DynamoSessionCache}. */
export interface DynamoSessionCacheOptions {
  readonly client: DynamoDBClient;
  /** The `sessions` table: `pk` = sid, `data` (binary), `expiresAt` (s), `version`. */
  readonly tableName: string;
  /** Only `sessionsTtl` is used. @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** Drives every TTL decision. @default the system clock */
  readonly clock?: Clock;
}

/** A session item as stored. */
interface SessionItem {
  pk: string;
  data: Uint8Array;
  /** Seconds since the epoch (DynamoDB TTL). */
  expiresAt: number;
  /** A token every write replaces: an update writes only over the version it read. */
  version: string;
}

/**
 * The {@link SessionCache} on DynamoDB: one item per sid with a TTL attribute. Reads filter
 * on `expiresAt`, since TTL deletion lags.
 */
export class DynamoSessionCache implements SessionCache {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly config: BrokerConfig;
  private readonly clock: Clock;

  constructor(options: DynamoSessionCacheOptions) {
    this.client = options.client;
    this.table = options.tableName;
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.clock = options.clock ?? systemClock;
  }

  async commitSession(sid: string, session: Cacheable): Promise<void> {
    const Item = this.item(sid, await session.toCacheEntry());
    await awsCall('PutItem', this.table, [sid], () =>
      this.client.send(new PutItemCommand({ TableName: this.table, Item })),
    );
  }

  async restoreSession(sid: string): Promise<Uint8Array | null> {
    return (await this.read(sid)).data;
  }

  /**
   * Optimistic concurrency on the item's `version`: the write is conditioned on the version
   * read, and a write that lost the race reads again and retries.
   */
  async updateSession(sid: string, update: SessionUpdate): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.read(sid);
      const next = await update(current.data);
      if (!next) return false;
      const Item = this.item(sid, await next.toCacheEntry());
      const fresh = current.version === undefined;
      try {
        await awsCall(`PutItem (attempt ${attempt})`, this.table, [sid], () =>
          this.client.send(
            new PutItemCommand({
              TableName: this.table,
              Item,
              ConditionExpression: fresh ? 'attribute_not_exists(#version)' : '#version = :v',
              ExpressionAttributeNames: { '#version': 'version' },
              ...(fresh ? {} : { ExpressionAttributeValues: marshall({ ':v': current.version }) }),
            }),
          ),
        );
        return true;
      } catch (error) {
        const lost =
          error instanceof Error && error.cause instanceof ConditionalCheckFailedException;
        if (!lost || attempt >= SESSION_UPDATE_ATTEMPTS) throw error;
        // Spreads writers that keep colliding (a client subscribing to many streams at once).
        await new Promise((r) => setTimeout(r, Math.random() * SESSION_RETRY_JITTER_MS * attempt));
      }
    }
  }

  async finishSession(sid: string): Promise<void> {
    const expiresAt = ttlSeconds(this.clock.now() + this.config.sessionsTtl * 1000);
    try {
      await awsCall('UpdateItem', this.table, [sid], () =>
        this.client.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: marshall({ pk: sid }),
            UpdateExpression: 'SET expiresAt = :e',
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: marshall({ ':e': expiresAt }),
          }),
        ),
      );
    } catch (error) {
      // An unknown session has nothing to finish.
      if (error instanceof Error && error.cause instanceof ConditionalCheckFailedException) return;
      throw error;
    }
  }

  /** A session item with a new version token, alive for the session TTL from now. */
  private item(sid: string, data: Uint8Array) {
    const expiresAt = ttlSeconds(activeSessionExpiry(this.clock.now(), this.config));
    const item: SessionItem = { pk: sid, data, expiresAt, version: randomUUID() };
    return marshall(item);
  }

  /** The live session's data (`null` when unknown or expired) and the item's version. */
  private async read(sid: string): Promise<{ data: Uint8Array | null; version?: string }> {
    const out = await awsCall('GetItem', this.table, [sid], () =>
      this.client.send(
        new GetItemCommand({
          TableName: this.table,
          Key: marshall({ pk: sid }),
          ConsistentRead: true,
        }),
      ),
    );
    if (!out.Item) return { data: null };
    const item = unmarshall(out.Item) as Partial<SessionItem>;
    const live = item.data !== undefined && Number(item.expiresAt) * 1000 > this.clock.now();
    return {
      data: live ? item.data! : null,
      ...(item.version === undefined ? {} : { version: item.version }),
    };
  }
}
