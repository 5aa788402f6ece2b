import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { AckManagerError, type AwsResourceError } from '../../../kernel/errors.js';
import {
  type AckState,
  type AckStore,
  type AckUpdate,
  applyAckUpdate,
  DEFAULT_ACK_TTL_SECONDS,
} from '../../../messaging/ack-store.js';
import { awsCall } from '../call.js';
import { numberAtOrBelow, offsetAttribute, offsetOf } from './offset-attribute.js';

/** Options of {@link DynamoAckStore}. */
export interface DynamoAckStoreOptions {
  readonly client: DynamoDBClient;
  /** The `acks` table (`pk`; TTL attribute `expiresAt`). */
  readonly tableName: string;
  /**
   * Seconds an ack item outlives its last write (`expiresAt`, refreshed by every write;
   * `LAMBDACABLE_ACK_TTL`). Longer than a hole is retained, so an item only expires when
   * no hole of it can come back; a partition that comes back later starts a new state with
   * a floor (see `AckState.floor`).
   * @default {@link DEFAULT_ACK_TTL_SECONDS} (30 days)
   */
  readonly ttlSeconds?: number;
  /**
   * Merge attempts of {@link DynamoAckStore.commit} under concurrent writers.
   * @default 8
   */
  readonly maxCommitAttempts?: number;
}

/**
 * Ack state in the `acks` table (`pk` = group `#` partition; the batch consumer's partition
 * is an `ackPartition`, topic `#` key): `ackLevel` (S), `holes` (M: offset in decimal → ms
 * stamped), `floor` (S), `version` (N) and `expiresAt` (N, seconds: the table's TTL).
 * Offsets are stream sequence numbers of up to 40 digits, more than a DynamoDB number's 38:
 * the level and the floor are stored as zero-padded strings of fixed width
 * (`encodeOffset`), which DynamoDB orders as the numbers, and a hole is a map key (a string
 * of any length; never compared by DynamoDB). An item an older release wrote with numbers
 * (N) is read as well, and each write stores what it sets in the new form.
 *
 * A level only moves forward: `save` is conditional on the stored level being lower;
 * `commit` reads, merges and writes on the condition that `version` is unchanged,
 * re-reading on a concurrent write. An item past `expiresAt` that DynamoDB has not deleted
 * yet is still read: it is the true state, and the write refreshes it.
 */
export class DynamoAckStore implements AckStore {
  constructor(private readonly options: DynamoAckStoreOptions) {}

  async load(group: string, partition: string): Promise<bigint | undefined> {
    return (await this.loadState(group, partition))?.ackLevel;
  }

  async save(group: string, partition: string, level: bigint): Promise<void> {
    // A level an older release stored is a number (N), never equal to a longer level: lower
    // than `level` exactly when at or below the greatest number at or below it.
    const number = numberAtOrBelow(level);
    try {
      await this.call('UpdateItem', group, partition, () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: this.key(group, partition),
            UpdateExpression:
              'SET ackLevel = :level, updatedAt = :now, expiresAt = :expires ADD version :one',
            ConditionExpression: `attribute_not_exists(ackLevel) OR (attribute_type(ackLevel, :S) AND ackLevel < :level) OR (attribute_type(ackLevel, :N) AND ackLevel ${number === level ? '<' : '<='} :number)`,
            ExpressionAttributeValues: {
              ':level': offsetAttribute(level),
              ':number': { N: number.toString() },
              ':S': { S: 'S' },
              ':N': { S: 'N' },
              ':now': { N: String(Date.now()) },
              ':expires': { N: String(this.expiresAt(Date.now())) },
              ':one': { N: '1' },
            },
          }),
        ),
      );
    } catch (error) {
      // Another invocation already stored this level or a higher one.
      if ((error as AwsResourceError).cause instanceof ConditionalCheckFailedException) return;
      throw error;
    }
  }

  async loadState(group: string, partition: string): Promise<AckState | undefined> {
    const out = await this.call('GetItem', group, partition, () =>
      this.options.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: this.key(group, partition),
          ConsistentRead: true,
        }),
      ),
    );
    const item = out.Item;
    const level = offsetOf(item?.ackLevel);
    if (!item || level === undefined) return undefined;
    const holes = new Map<bigint, number>();
    for (const [offset, at] of Object.entries(item.holes?.M ?? {})) {
      holes.set(holeOffset(offset), Number(at.N ?? '0'));
    }
    const floor = offsetOf(item.floor);
    return {
      ackLevel: level,
      holes,
      ...(floor === undefined ? {} : { floor }),
      version: Number(item.version?.N ?? '0'),
    };
  }

  async commit(
    group: string,
    partition: string,
    update: AckUpdate,
    basis?: { readonly state: AckState | undefined },
  ): Promise<AckState> {
    const attempts = this.options.maxCommitAttempts ?? 8;
    for (let attempt = 1; ; attempt++) {
      // The caller's recent read saves a GetItem; a conflict means it was stale.
      const stored = attempt === 1 && basis ? basis.state : await this.loadState(group, partition);
      const next = applyAckUpdate(stored, update);
      const holes: Record<string, AttributeValue> = {};
      for (const [offset, at] of next.holes) holes[offset.toString()] = { N: String(at) };
      try {
        await this.call('UpdateItem', group, partition, () =>
          this.options.client.send(
            new UpdateItemCommand({
              TableName: this.options.tableName,
              Key: this.key(group, partition),
              UpdateExpression: `SET ackLevel = :level, holes = :holes, version = :next, updatedAt = :now, expiresAt = :expires${next.floor === undefined ? '' : ', #floor = :floor'}`,
              // FLOOR is a DynamoDB reserved word.
              ...(next.floor === undefined
                ? {}
                : { ExpressionAttributeNames: { '#floor': 'floor' } }),
              // `version` is missing on an item only `save` of an older release wrote.
              ConditionExpression:
                stored === undefined
                  ? 'attribute_not_exists(ackLevel)'
                  : stored.version === 0
                    ? 'attribute_not_exists(version) OR version = :version'
                    : 'version = :version',
              ExpressionAttributeValues: {
                ':level': offsetAttribute(next.ackLevel),
                ':holes': { M: holes },
                ':next': { N: String(next.version) },
                ':now': { N: String(update.now) },
                ':expires': { N: String(this.expiresAt(update.now)) },
                ...(next.floor === undefined ? {} : { ':floor': offsetAttribute(next.floor) }),
                ...(stored === undefined ? {} : { ':version': { N: String(stored.version) } }),
              },
            }),
          ),
        );
        return next;
      } catch (error) {
        const conflict =
          (error as AwsResourceError).cause instanceof ConditionalCheckFailedException;
        if (!conflict || attempt >= attempts) throw error;
        // Another batch wrote in between: merge into what it stored.
      }
    }
  }

  /** The TTL of an item written at `now` (ms), in whole seconds. */
  private expiresAt(now: number): number {
    return Math.floor(now / 1000) + (this.options.ttlSeconds ?? DEFAULT_ACK_TTL_SECONDS);
  }

  private key(group: string, partition: string): Record<string, AttributeValue> {
    return { pk: { S: `${group}#${partition}` } };
  }

  private call<T>(op: string, group: string, partition: string, fn: () => Promise<T>): Promise<T> {
    return awsCall(op, this.options.tableName, [`${group}#${partition}`], fn);
  }
}

/** The offset of a hole's map key: its decimal digits. */
function holeOffset(key: string): bigint {
  if (!/^-?\d+$/.test(key)) throw new AckManagerError(`not a hole's offset: ${key.slice(0, 60)}`);
  return BigInt(key);
}
