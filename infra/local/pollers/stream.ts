import {
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record as StreamRecord,
} from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBBatchResponse, DynamoDBRecord } from 'aws-lambda';
import { PollLoop } from './loop';

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
  /**
   * Retries of a failed batch before it is given up (Lambda's `MaximumRetryAttempts`);
   * a batch is retried from its first failed record, in order, until it succeeds.
   * @default Infinity (Lambda's default, -1: until the records expire)
   */
  readonly maxRetryAttempts?: number;
  /**
   * Pause before a failed batch is retried, in ms (the shard waits; others go on).
   * @default 500
   */
  readonly retryDelayMs?: number;
  /**
   * Called with the records given up after `maxRetryAttempts` (Lambda's on-failure
   * destination), their shard and how many times the batch was invoked; the shard then goes
   * on after them.
   * @default logs them
   */
  readonly onFailure?: (
    records: DynamoDBRecord[],
    reason: unknown,
    batch: { readonly shardId: string; readonly invokeCount: number },
  ) => Promise<void> | void;
  /** Logs handler failures. @default console */
  readonly logger?: Pick<Console, 'error' | 'info'>;
}

interface ShardState {
  readonly parent: string | undefined;
  iterator: string | undefined;
  /** The checkpoint: the last sequence number handled (or given up). */
  last: string | undefined;
  /** Where to read again after a failure: the first record not handled yet. */
  retryAt: string | undefined;
  /** Consecutive failures of the batch that starts at `retryAt`. */
  attempts: number;
  /** No poll before this time (ms) after a failure. */
  notBefore: number;
  closed: boolean;
}

/**
 * Drives a handler from a DynamoDB Stream the way Lambda's event source mapping does,
 * for local runs and tests: records in order per shard (a child shard after its parent),
 * the checkpoint moves only after the handler returned; a thrown handler (or a rejected
 * GetRecords) retries the same batch, and `batchItemFailures` retries from the first
 * named record (the checkpoint becomes the record before it). A failure is logged and
 * does not stop the other shards.
 */
export class StreamPoller {
  private readonly shards = new Map<string, ShardState>();
  private readonly logger: Pick<Console, 'error' | 'info'>;
  private readonly loop: PollLoop;

  constructor(private readonly options: StreamPollerOptions) {
    this.logger = options.logger ?? console;
    this.loop = new PollLoop({
      poll: () => this.pollOnce(),
      failure: 'stream poll failed',
      logger: this.logger,
      idleMs: options.idleMs ?? 200,
    });
  }

  /** Polls in the background until {@link stop}. */
  start(): void {
    this.loop.start();
  }

  /** Stops polling and waits for the current poll. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /**
   * One GetRecords per open shard that is not waiting out a retry delay, handed to the
   * handler; returns how many records were handed over (failed ones included). Handler
   * failures are logged and retried by a later poll, never thrown.
   */
  async pollOnce(): Promise<number> {
    await this.discoverShards();
    let total = 0;
    for (const [shardId, state] of this.shards) {
      if (state.closed || Date.now() < state.notBefore) continue;
      const parent = state.parent ? this.shards.get(state.parent) : undefined;
      if (parent && !parent.closed) continue; // a child shard waits for its parent
      let records: StreamRecord[];
      let next: string | undefined;
      try {
        if (!state.iterator) state.iterator = await this.iterator(shardId, state);
        const out = await this.options.streams.send(
          new GetRecordsCommand({
            ShardIterator: state.iterator,
            Limit: this.options.batchSize ?? 100,
          }),
        );
        records = out.Records ?? [];
        next = out.NextShardIterator;
      } catch (error) {
        state.iterator = undefined;
        const name = (error as Error).name;
        if (name === 'ExpiredIteratorException' || name === 'TrimmedDataAccessException') {
          // The iterator went stale (DynamoDB Local also does this to an iterator it handed
          // out before the shard's first record): a new one from the checkpoint, at once.
          this.logger.info(`${shardId}: ${name}; reading again from the checkpoint`);
          continue;
        }
        this.logger.error(
          `GetRecords on ${shardId} failed; reading again from the checkpoint`,
          error,
        );
        state.notBefore = Date.now() + (this.options.retryDelayMs ?? 500);
        continue;
      }
      if (records.length === 0) {
        state.iterator = next;
        if (!next) state.closed = true;
        continue;
      }
      total += records.length;
      let failedAt: number | undefined;
      let reason: unknown;
      try {
        const response = await this.options.handler(records.map(toLambdaRecord));
        const failures = response?.batchItemFailures ?? [];
        if (failures.length > 0) {
          // Lambda resumes from the lowest failed sequence number; one it cannot find
          // fails the whole batch.
          const indexes = failures.map((f) =>
            records.findIndex((r) => r.dynamodb?.SequenceNumber === f.itemIdentifier),
          );
          failedAt = indexes.includes(-1) ? 0 : Math.min(...indexes);
          reason = new Error(
            `batchItemFailures: ${failures.map((f) => f.itemIdentifier).join(', ')}`,
          );
        }
      } catch (error) {
        failedAt = 0;
        reason = error;
      }
      if (failedAt === undefined) {
        state.last = records[records.length - 1]?.dynamodb?.SequenceNumber ?? state.last;
        state.retryAt = undefined;
        state.attempts = 0;
        state.iterator = next;
        if (!next) state.closed = true;
        continue;
      }
      if (failedAt > 0) state.last = records[failedAt - 1]?.dynamodb?.SequenceNumber ?? state.last;
      const at = records[failedAt]?.dynamodb?.SequenceNumber;
      state.attempts = at === state.retryAt ? state.attempts + 1 : 1;
      state.retryAt = at;
      const max = this.options.maxRetryAttempts ?? Number.POSITIVE_INFINITY;
      if (state.attempts > max) {
        const given = records.slice(failedAt).map(toLambdaRecord);
        this.logger.error(
          `${shardId}: giving up ${given.length} records after ${max} retries from ${at}`,
          reason,
        );
        await this.options.onFailure?.(given, reason, { shardId, invokeCount: state.attempts });
        state.last = records[records.length - 1]?.dynamodb?.SequenceNumber ?? state.last;
        state.retryAt = undefined;
        state.attempts = 0;
        state.iterator = next;
        if (!next) state.closed = true;
        continue;
      }
      this.logger.error(`${shardId}: batch failed at ${at}; retrying from it`, reason);
      state.iterator = undefined; // read again AT the first record not handled
      state.notBefore = Date.now() + (this.options.retryDelayMs ?? 500);
    }
    return total;
  }

  private async discoverShards(): Promise<void> {
    const out = await this.options.streams.send(
      new DescribeStreamCommand({ StreamArn: this.options.streamArn }),
    );
    for (const shard of out.StreamDescription?.Shards ?? []) {
      if (!shard.ShardId || this.shards.has(shard.ShardId)) continue;
      this.shards.set(shard.ShardId, {
        parent: shard.ParentShardId,
        iterator: undefined,
        last: undefined,
        retryAt: undefined,
        attempts: 0,
        notBefore: 0,
        closed: false,
      });
    }
  }

  private async iterator(shardId: string, state: ShardState): Promise<string | undefined> {
    const input = state.retryAt
      ? { ShardIteratorType: 'AT_SEQUENCE_NUMBER' as const, SequenceNumber: state.retryAt }
      : state.last
        ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as const, SequenceNumber: state.last }
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
