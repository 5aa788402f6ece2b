import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { AwsResourceError } from '../../errors.js';
import type { AckStore } from '../../messaging/ack-store.js';

/**
 * Ack levels in the `acks` table (`pk` = group `#` partition). A level only moves
 * forward: the write is conditional on the stored level being lower.
 */
export class DynamoAckStore implements AckStore {
  constructor(private readonly options: { client: DynamoDBClient; tableName: string }) {}

  async load(group: string, partition: string): Promise<bigint | undefined> {
    const out = await this.call('GetItem', group, partition, () =>
      this.options.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: { pk: { S: `${group}#${partition}` } },
          ConsistentRead: true,
        }),
      ),
    );
    const level = out.Item?.ackLevel?.N;
    return level === undefined ? undefined : BigInt(level);
  }

  async save(group: string, partition: string, level: bigint): Promise<void> {
    try {
      await this.call('UpdateItem', group, partition, () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: { pk: { S: `${group}#${partition}` } },
            UpdateExpression: 'SET ackLevel = :level, updatedAt = :now',
            ConditionExpression: 'attribute_not_exists(ackLevel) OR ackLevel < :level',
            ExpressionAttributeValues: {
              ':level': { N: level.toString() },
              ':now': { N: String(Date.now()) },
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

  private async call<T>(
    op: string,
    group: string,
    partition: string,
    fn: () => Promise<T>,
  ): Promise<T> {
    try {
      return await fn();
    } catch (cause) {
      throw new AwsResourceError(
        `${op} on ${this.options.tableName} failed for ${group}#${partition}`,
        {
          resource: this.options.tableName,
          ids: [`${group}#${partition}`],
          cause,
        },
      );
    }
  }
}
