import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { AwsResourceError } from '../../../kernel/errors.js';
import {
  type AckState,
  type AckStore,
  type AckUpdate,
  applyAckUpdate,
} from '../../../messaging/ack-store.js';
import { awsCall } from '../call.js';

/**
 * Ack state in the `acks` table (`pk` = group `#` partition, the batch consumer's partition being an `ackPartition`: topic `#` key): `ackLevel` (N), `holes`
 * (M: offset → ms opened) and `version` (N). A level only moves forward: `save` is
 * conditional on the stored level being lower; `commit` reads, merges and writes on the
 * condition that `version` is unchanged, re-reading on a concurrent write.
 */
export class DynamoAckStore implements AckStore {
  constructor(
    private readonly options: {
      client: DynamoDBClient;
      tableName: string;
      /**
       * Merge attempts of {@link commit} under concurrent writers.
       * @default 8
       */
      maxCommitAttempts?: number;
    },
  ) {}

  async load(group: string, partition: string): Promise<bigint | undefined> {
    return (await this.loadState(group, partition))?.ackLevel;
  }

  async save(group: string, partition: string, level: bigint): Promise<void> {
    try {
      await this.call('UpdateItem', group, partition, () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: this.key(group, partition),
            UpdateExpression: 'SET ackLevel = :level, updatedAt = :now ADD version :one',
            ConditionExpression: 'attribute_not_exists(ackLevel) OR ackLevel < :level',
            ExpressionAttributeValues: {
              ':level': { N: level.toString() },
              ':now': { N: String(Date.now()) },
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
    const level = item?.ackLevel?.N;
    if (!item || level === undefined) return undefined;
    const holes = new Map<bigint, number>();
    for (const [offset, at] of Object.entries(item.holes?.M ?? {})) {
      holes.set(BigInt(offset), Number(at.N ?? '0'));
    }
    return { ackLevel: BigInt(level), holes, version: Number(item.version?.N ?? '0') };
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
              UpdateExpression:
                'SET ackLevel = :level, holes = :holes, version = :next, updatedAt = :now',
              // `version` is missing on an item only `save` of an older release wrote.
              ConditionExpression:
                stored === undefined
                  ? 'attribute_not_exists(ackLevel)'
                  : stored.version === 0
                    ? 'attribute_not_exists(version) OR version = :version'
                    : 'version = :version',
              ExpressionAttributeValues: {
                ':level': { N: next.ackLevel.toString() },
                ':holes': { M: holes },
                ':next': { N: String(next.version) },
                ':now': { N: String(update.now) },
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

  private key(group: string, partition: string): Record<string, AttributeValue> {
    return { pk: { S: `${group}#${partition}` } };
  }

  private call<T>(op: string, group: string, partition: string, fn: () => Promise<T>): Promise<T> {
    return awsCall(op, this.options.tableName, [`${group}#${partition}`], fn);
  }
}
