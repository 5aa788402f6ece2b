import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { AwsResourceError } from '../../../kernel/errors.js';
import {
  checkKeyBytes,
  MAX_CONNECTION_ID_BYTES,
  MAX_IDENTIFIER_BYTES,
  MAX_STREAM_BYTES,
  utf8Bytes,
} from '../../../kernel/limits.js';
import { bucketOf } from '../../../realtime/keepalive/partitions.js';
import type { Subscription, SubscriptionAdd } from '../../../realtime/ports.js';
import { awsCall } from '../call.js';
import { legacySubscriptionKey, subscriptionKey, toSubscription } from './connection-items.js';
import type { StreamShards } from './stream-shards.js';

/** What an add found: the stream held by this identifier, or by another. */
function heldBy(held: Subscription, identifier: string): SubscriptionAdd {
  return held.identifier === identifier ? 'subscribed' : 'stream_taken';
}

/** What {@link SubscriptionWrites} writes with. */
export interface SubscriptionWritesOptions {
  readonly client: DynamoDBClient;
  /** The `connections` table. */
  readonly tableName: string;
  /** Seconds a subscription item lives (`expiresAt`). */
  readonly itemTtlSeconds: number;
}

/**
 * A connection's subscription items in the `connections` table (`sk` `s#<stream>`, one per
 * stream) and the count of them on its connection item (`subs`): the writes and the read by
 * key of `DynamoConnectionStore`, in a module of their own.
 */
export class SubscriptionWrites {
  constructor(
    private readonly options: SubscriptionWritesOptions,
    private readonly shards: StreamShards,
    private readonly buckets: () => Promise<number>,
  ) {}

  /**
   * Stores the subscription unless the connection holds its stream already (a conditional
   * put on `s#<stream>`). With `limit`, the connection item's count `subs` is raised first,
   * on condition that it is under the limit, and lowered again when the put finds the stream
   * held: two writes, no transaction, so that concurrent subscribes of one connection never
   * conflict. A Lambda stopped between them leaves the count one high until the connection
   * ends: it errs on the side of the limit. Throws {@link LimitExceededError} for a key part
   * over its limit.
   */
  async addSubscription(s: Subscription, limit?: number): Promise<SubscriptionAdd> {
    checkKeyBytes('connection id', s.connectionId, MAX_CONNECTION_ID_BYTES);
    checkKeyBytes('stream name', s.stream, MAX_STREAM_BYTES);
    checkKeyBytes('identifier', s.identifier, MAX_IDENTIFIER_BYTES);
    if (limit !== undefined) {
      const counted = await this.count(s.connectionId, limit);
      if (counted !== 'counted') {
        // At the limit, a subscription stored already is still told apart (a re-sent subscribe).
        const held =
          counted === 'limit' ? await this.subscriptionOf(s.connectionId, s.stream) : undefined;
        return held ? heldBy(held, s.identifier) : counted;
      }
    }
    let held: Subscription | undefined;
    try {
      held = await this.shards.place(s.stream, s.connectionId, (keys) =>
        this.putSubscription(s, keys),
      );
    } catch (error) {
      // Not stored: the slot it took goes back (best effort; a count too high errs on the
      // side of the limit, and ends with the connection).
      if (limit !== undefined) await this.uncount(s.connectionId, false).catch(() => undefined);
      throw error;
    }
    if (!held) return 'added';
    if (limit !== undefined) await this.uncount(s.connectionId, false);
    return heldBy(held, s.identifier);
  }

  /** Raises the connection's count of subscriptions unless it is at `limit`. */
  private async count(connectionId: string, limit: number): Promise<'counted' | 'limit' | 'gone'> {
    const done = await this.updateConnection(connectionId, {
      UpdateExpression: 'ADD #subs :one',
      ConditionExpression:
        'attribute_exists(pk) AND (attribute_not_exists(#subs) OR #subs < :limit)',
      ExpressionAttributeNames: { '#subs': 'subs' },
      ExpressionAttributeValues: { ':one': { N: '1' }, ':limit': { N: String(limit) } },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    return done === true ? 'counted' : done.item ? 'limit' : 'gone';
  }

  /**
   * Lowers the connection's count (never under 0) and, with `touch`, marks it changed; a
   * connection that is gone stays gone.
   */
  private async uncount(connectionId: string, touch: boolean): Promise<void> {
    const now = { ':now': { N: String(Date.now()) } };
    const done = await this.updateConnection(connectionId, {
      UpdateExpression: `${touch ? 'SET #since = :now ' : ''}ADD #subs :minus`,
      ConditionExpression: 'attribute_exists(pk) AND #subs > :zero',
      ExpressionAttributeNames: { '#subs': 'subs', ...(touch ? { '#since': 'since' } : {}) },
      ExpressionAttributeValues: {
        ':minus': { N: '-1' },
        ':zero': { N: '0' },
        ...(touch ? now : {}),
      },
    });
    // Not counted (stored without a limit): only the change is marked.
    if (done !== true && touch) await this.touchConnection(connectionId);
  }

  /** Puts the subscription unless its stream is held: `undefined`, or the holder. */
  private async putSubscription(
    s: Subscription,
    keys: { fanKey: string; fanSort: string },
  ): Promise<Subscription | undefined> {
    const bucket = bucketOf(s.connectionId, await this.buckets());
    const item = marshall(
      {
        pk: `c#${s.connectionId}`,
        sk: subscriptionKey(s.stream),
        connectionId: s.connectionId,
        stream: s.stream,
        identifier: s.identifier,
        whisper: s.whisper ?? false,
        // Fan-out posts with it, without reading the connection item.
        endpoint: s.endpoint,
        subscribedAt: s.subscribedAt,
        ...keys,
        bucket: `b${bucket}`,
        since: Date.now(),
        expiresAt: Math.floor(Date.now() / 1000) + this.options.itemTtlSeconds,
      },
      { removeUndefinedValues: true },
    );
    try {
      await this.call('PutItem', s.connectionId, () =>
        this.options.client.send(
          new PutItemCommand({
            TableName: this.options.tableName,
            Item: item,
            ConditionExpression: 'attribute_not_exists(pk)',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      return undefined;
    } catch (error) {
      const cause = (error as AwsResourceError).cause;
      if (!(cause instanceof ConditionalCheckFailedException)) throw error;
      if (cause.Item) return toSubscription(unmarshall(cause.Item));
      // The holder went in between: held by someone all the same, read it if still there.
      return (await this.subscriptionOf(s.connectionId, s.stream)) ?? { ...s, identifier: '' };
    }
  }

  /**
   * Removes the connection's subscription to `stream` if `identifier` holds it (a conditional
   * delete), lowering the count and marking the connection changed, so that
   * {@link changesSince} reports it. A subscription stored under the key of earlier versions
   * ({@link legacySubscriptionKey}) is removed too.
   */
  async removeSubscription(
    connectionId: string,
    stream: string,
    identifier: string,
  ): Promise<boolean> {
    if (
      utf8Bytes(connectionId) > MAX_CONNECTION_ID_BYTES ||
      utf8Bytes(stream) > MAX_STREAM_BYTES ||
      utf8Bytes(identifier) > MAX_IDENTIFIER_BYTES
    ) {
      return false; // never stored
    }
    const pk = { S: `c#${connectionId}` };
    try {
      await this.call('DeleteItem', connectionId, () =>
        this.options.client.send(
          new DeleteItemCommand({
            TableName: this.options.tableName,
            Key: { pk, sk: { S: subscriptionKey(stream) } },
            ConditionExpression: 'identifier = :id',
            ExpressionAttributeValues: { ':id': { S: identifier } },
          }),
        ),
      );
      await this.uncount(connectionId, true);
      return true;
    } catch (error) {
      if (!((error as AwsResourceError).cause instanceof ConditionalCheckFailedException))
        throw error;
    }
    const legacy = await this.call('DeleteItem', connectionId, () =>
      this.options.client.send(
        new DeleteItemCommand({
          TableName: this.options.tableName,
          Key: { pk, sk: { S: legacySubscriptionKey(stream, identifier) } },
          ReturnValues: 'ALL_OLD',
        }),
      ),
    );
    if (!legacy.Attributes) return false;
    await this.touchConnection(connectionId);
    return true;
  }

  async subscriptionOf(connectionId: string, stream: string): Promise<Subscription | undefined> {
    if (utf8Bytes(connectionId) > MAX_CONNECTION_ID_BYTES || utf8Bytes(stream) > MAX_STREAM_BYTES) {
      return undefined; // never stored
    }
    const out = await this.call('GetItem', connectionId, () =>
      this.options.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: { pk: { S: `c#${connectionId}` }, sk: { S: subscriptionKey(stream) } },
          ConsistentRead: true,
        }),
      ),
    );
    return out.Item ? toSubscription(unmarshall(out.Item)) : undefined;
  }

  /**
   * Marks a connection changed (its `since` now), so that `changesSince` reports it; a
   * connection that is gone stays gone (the update never creates an item).
   */
  async touchConnection(connectionId: string): Promise<void> {
    await this.updateConnection(connectionId, {
      UpdateExpression: 'SET #since = :now',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#since': 'since' },
      ExpressionAttributeValues: { ':now': { N: String(Date.now()) } },
    });
  }

  /**
   * An update of the connection item on a condition: `true`, or the item the condition
   * failed on (with `ReturnValuesOnConditionCheckFailure`).
   */
  private async updateConnection(
    connectionId: string,
    update: Omit<UpdateItemCommandInput, 'TableName' | 'Key'>,
  ): Promise<true | { item?: Record<string, AttributeValue> }> {
    try {
      await this.call('UpdateItem', connectionId, () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: { pk: { S: `c#${connectionId}` }, sk: { S: 'c' } },
            ...update,
          }),
        ),
      );
      return true;
    } catch (error) {
      const cause = (error as AwsResourceError).cause;
      if (!(cause instanceof ConditionalCheckFailedException)) throw error;
      return cause.Item ? { item: cause.Item } : {};
    }
  }

  private call<T>(operation: string, id: string, fn: () => Promise<T>): Promise<T> {
    return awsCall(operation, this.options.tableName, [id], fn);
  }
}
