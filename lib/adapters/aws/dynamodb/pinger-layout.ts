import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import type { AwsResourceError } from '../../../kernel/errors.js';
import {
  DEFAULT_LAYOUT,
  type PartitionReport,
  type PingerLayout,
} from '../../../realtime/keepalive/partitions.js';
import type { PingerLayoutStore } from '../../../realtime/keepalive/ports.js';
import { awsCall } from '../call.js';

/** The partition key of the pinger's items in the connections table. */
const PK = 'pinger';
/** Reports outlive the minutes they describe by this much, then expire. */
const REPORT_TTL_SECONDS = 3600;

/** Options of {@link DynamoPingerLayoutStore}. */
export interface DynamoPingerLayoutStoreOptions {
  readonly client: DynamoDBClient;
  /** The connections table: its items are keyed `c#<id>`, the pinger's `pinger`. */
  readonly tableName: string;
  /** Dates the reports' expiry. @default the system clock */
  readonly clock?: Clock;
}

/**
 * The pinger layout and run reports, in the connections table: `pk` `pinger`, `sk` `layout`
 * (attributes `buckets`, `partitions`; no TTL: B must never be forgotten) and `run#<i>` for
 * partition `i`'s latest report (with `expiresAt`). They carry no `bucket`, `stream` or
 * `identity`, so no index of the table holds them.
 */
export class DynamoPingerLayoutStore implements PingerLayoutStore {
  private readonly clock: Clock;

  constructor(private readonly options: DynamoPingerLayoutStoreOptions) {
    this.clock = options.clock ?? systemClock;
  }

  async layout(): Promise<PingerLayout> {
    const out = await this.call('GetItem', () =>
      this.options.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: { pk: { S: PK }, sk: { S: 'layout' } },
          ConsistentRead: true,
        }),
      ),
    );
    if (!out.Item) return DEFAULT_LAYOUT;
    const row = unmarshall(out.Item);
    return { buckets: Number(row.buckets), partitions: Number(row.partitions) };
  }

  /** A conditional put: the stored item must still hold `current` (or none, for the default). */
  async replaceLayout(current: PingerLayout, next: PingerLayout): Promise<boolean> {
    const isDefault =
      current.buckets === DEFAULT_LAYOUT.buckets &&
      current.partitions === DEFAULT_LAYOUT.partitions;
    try {
      await this.call('PutItem', () =>
        this.options.client.send(
          new PutItemCommand({
            TableName: this.options.tableName,
            Item: marshall({ pk: PK, sk: 'layout', ...next }),
            ConditionExpression: isDefault
              ? 'attribute_not_exists(pk) OR (#b = :b AND #k = :k)'
              : '#b = :b AND #k = :k',
            ExpressionAttributeNames: { '#b': 'buckets', '#k': 'partitions' },
            ExpressionAttributeValues: {
              ':b': { N: String(current.buckets) },
              ':k': { N: String(current.partitions) },
            },
          }),
        ),
      );
      return true;
    } catch (error) {
      if ((error as AwsResourceError).cause instanceof ConditionalCheckFailedException)
        return false;
      throw error;
    }
  }

  /** One Query over the `run#` items; expired ones (TTL deletion lags) are left out. */
  async reports(): Promise<PartitionReport[]> {
    const out: PartitionReport[] = [];
    const nowSeconds = Math.floor(this.clock.now() / 1000);
    let ExclusiveStartKey: Record<string, never> | undefined;
    do {
      const page = await this.call('Query', () =>
        this.options.client.send(
          new QueryCommand({
            TableName: this.options.tableName,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :run)',
            ExpressionAttributeValues: { ':pk': { S: PK }, ':run': { S: 'run#' } },
            ...(ExclusiveStartKey ? { ExclusiveStartKey } : {}),
          }),
        ),
      );
      for (const item of page.Items ?? []) {
        const row = unmarshall(item);
        if (Number(row.expiresAt) <= nowSeconds) continue;
        out.push({
          partition: Number(row.partition),
          partitions: Number(row.partitions),
          connections: Number(row.connections),
          load: Number(row.load),
          startedAt: Number(row.startedAt),
          at: Number(row.at),
        });
      }
      ExclusiveStartKey = page.LastEvaluatedKey as Record<string, never> | undefined;
    } while (ExclusiveStartKey);
    return out;
  }

  /** A put conditional on no later run's report being stored (runs of a minute overlap). */
  async putReport(report: PartitionReport): Promise<void> {
    const expiresAt = Math.floor(this.clock.now() / 1000) + REPORT_TTL_SECONDS;
    try {
      await this.call('PutItem', () =>
        this.options.client.send(
          new PutItemCommand({
            TableName: this.options.tableName,
            Item: marshall({ pk: PK, sk: `run#${report.partition}`, ...report, expiresAt }),
            ConditionExpression: 'attribute_not_exists(pk) OR startedAt <= :s',
            ExpressionAttributeValues: { ':s': { N: String(report.startedAt) } },
          }),
        ),
      );
    } catch (error) {
      if ((error as AwsResourceError).cause instanceof ConditionalCheckFailedException) return;
      throw error;
    }
  }

  private call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    return awsCall(operation, this.options.tableName, [PK], fn);
  }
}
