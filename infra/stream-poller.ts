import {
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record as StreamRecord,
} from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';

/** Options of {@link StreamPoller}. */
export interface StreamPollerOptions {
  readonly streams: DynamoDBStreamsClient;
  readonly streamArn: string;
  /** The Lambda handler's work: records in, `batchItemFailures` out. */
  readonly handler: (records: DynamoDBRecord[]) => Promise<DynamoDBBatchResponse>;
  /**
   * Records per GetRecords (Lambda's `BatchSize`).
   * @default 100
   */
  readonly batchSize?: number;
  /**
   * Pause between polls of an idle shard, in ms.
   * @default 200
   */
  readonly idleMs?: number;
  /** Where a new shard starts. @default 'TRIM_HORIZON' */
  readonly start?: 'TRIM_HORIZON' | 'LATEST';
  /** Logs handler failures. @default console */
  readonly logger?: Pick<Console, 'error' | 'info'>;
}

interface ShardState {
  iterator: string | undefined;
  /** The last sequence number handled, to resume after a failure. */
  last: string | undefined;
  closed: boolean;
}

/**
 * Drives a handler from a DynamoDB Stream the way Lambda's event source mapping does,
 * for local runs and tests: in order per shard, and on `batchItemFailures` it retries
 * from the named record.
 */
export class StreamPoller {
  private readonly shards = new Map<string, ShardState>();
  private running = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly options: StreamPollerOptions) {}

  /** Polls in the background until {@link stop}. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        let handled = 0;
        try {
          handled = await this.pollOnce();
        } catch (error) {
          this.options.logger?.error('stream poll failed', error) ??
            console.error('stream poll failed', error);
        }
        if (handled === 0) await new Promise((r) => setTimeout(r, this.options.idleMs ?? 200));
      }
    })();
  }

  /** Stops polling and waits for the current poll. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** One GetRecords per open shard, handed to the handler; returns how many records were read. */
  async pollOnce(): Promise<number> {
    await this.discoverShards();
    let total = 0;
    for (const [shardId, state] of this.shards) {
      if (state.closed) continue;
      if (!state.iterator) state.iterator = await this.iterator(shardId, state.last);
      const out = await this.options.streams.send(
        new GetRecordsCommand({
          ShardIterator: state.iterator,
          Limit: this.options.batchSize ?? 100,
        }),
      );
      const records = out.Records ?? [];
      state.iterator = out.NextShardIterator;
      if (!out.NextShardIterator) state.closed = true;
      if (records.length === 0) continue;
      total += records.length;
      const response = await this.options.handler(records.map(toLambdaRecord));
      const failed = response?.batchItemFailures?.[0]?.itemIdentifier;
      if (failed) {
        // Lambda retries the batch from the first failed record.
        const index = records.findIndex((r) => r.dynamodb?.SequenceNumber === failed);
        const before = index > 0 ? records[index - 1]?.dynamodb?.SequenceNumber : undefined;
        state.last = before ?? state.last;
        state.iterator = await this.iterator(shardId, state.last, failed);
        state.closed = false;
      } else {
        state.last = records[records.length - 1]?.dynamodb?.SequenceNumber ?? state.last;
      }
    }
    return total;
  }

  private async discoverShards(): Promise<void> {
    const out = await this.options.streams.send(
      new DescribeStreamCommand({ StreamArn: this.options.streamArn }),
    );
    for (const shard of out.StreamDescription?.Shards ?? []) {
      if (!shard.ShardId || this.shards.has(shard.ShardId)) continue;
      this.shards.set(shard.ShardId, { iterator: undefined, last: undefined, closed: false });
    }
  }

  private async iterator(
    shardId: string,
    after?: string,
    at?: string,
  ): Promise<string | undefined> {
    const input = at
      ? { ShardIteratorType: 'AT_SEQUENCE_NUMBER' as const, SequenceNumber: at }
      : after
        ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as const, SequenceNumber: after }
        : { ShardIteratorType: this.options.start ?? 'TRIM_HORIZON' };
    const out = await this.options.streams.send(
      new GetShardIteratorCommand({
        StreamArn: this.options.streamArn,
        ShardId: shardId,
        ...input,
      }),
    );
    return out.ShardIterator;
  }
}

/** The shape a Lambda stream event has (binary attributes stay bytes; the relay reads both). */
function toLambdaRecord(r: StreamRecord): DynamoDBRecord {
  return {
    eventID: r.eventID,
    eventName: r.eventName,
    eventSource: 'aws:dynamodb',
    eventVersion: r.eventVersion,
    awsRegion: r.awsRegion,
    dynamodb: r.dynamodb as DynamoDBRecord['dynamodb'],
  } as DynamoDBRecord;
}
