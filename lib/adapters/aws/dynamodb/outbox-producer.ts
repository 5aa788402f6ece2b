import {
  type AttributeValue,
  BatchWriteItemCommand,
  type DynamoDBClient,
  TransactionCanceledException,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { newEventId } from '../../../events/event-id.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { AwsResourceError } from '../../../kernel/errors.js';
import type {
  CloseableProducer,
  OutgoingMessage,
  PublishOptions,
} from '../../../messaging/types.js';
import { awsCall } from '../call.js';

import { type DynamoOutboxOptions, lookupOf, outboxItem } from './outbox.js';

/** Options of {@link OutboxProducer}. */
export interface OutboxProducerOptions extends DynamoOutboxOptions {
  readonly client: DynamoDBClient;
  /** The topic of messages published without `opts.topic`. */
  readonly topic: string;
  /**
   * Attempts for items DynamoDB returns unprocessed.
   * @default 8
   */
  readonly maxAttempts?: number;
  /** @default the system clock */
  readonly clock?: Clock;
}

interface Pending {
  readonly item: Record<string, AttributeValue>;
  readonly id: string;
  /** The partition (`topic#key`). */
  readonly pk: string;
  resolve(): void;
  reject(error: unknown): void;
}

const BATCH_WRITE_LIMIT = 25;

/** Most actions of one `TransactWriteItems`. */
export const MAX_TRANSACTION_ITEMS = 100;

/**
 * A producer that writes messages to the outbox on their own (`BatchWriteItem`, 25 a
 * request, unprocessed items retried): the relay is the only writer to SQS, so every
 * message of a partition gets its offset from one sequence.
 */
export class OutboxProducer implements CloseableProducer {
  private pending: Pending[] = [];
  private scheduled: Promise<void> | undefined;
  private closed = false;
  private readonly clock: Clock;

  constructor(private readonly options: OutboxProducerOptions) {
    this.clock = options.clock ?? systemClock;
  }

  publish(message: OutgoingMessage, opts?: PublishOptions): Promise<void> {
    if (this.closed) {
      return Promise.reject(
        new AwsResourceError('producer is closed', { resource: this.options.tableName }),
      );
    }
    const timestamp = this.clock.now();
    const id = message.id ?? newEventId(timestamp);
    let item: Record<string, AttributeValue>;
    try {
      item = this.itemOf(message, id, timestamp, opts);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ item, id, pk: item.pk?.S ?? '', resolve, reject });
      // Collect what is published in the same tick into as few requests as possible.
      this.scheduled ??= new Promise<void>((r) => setImmediate(r)).then(() => this.flush());
    });
  }

  /** The outbox row of `message`; throws what the producer refuses before a write. */
  private itemOf(
    message: OutgoingMessage,
    id: string,
    timestamp: number,
    opts: PublishOptions | undefined,
  ): Record<string, AttributeValue> {
    return outboxItem(
      {
        id,
        topic: opts?.topic ?? this.options.topic,
        key: message.key,
        type: message.type ?? '',
        headers: message.headers ?? {},
        payload: message.value,
        timestamp,
      },
      this.options.retentionSeconds,
      lookupOf(this.options),
    );
  }

  /**
   * Writes `messages` all or none, in `TransactWriteItems` (a `Put` per message), where
   * DynamoDB allows it: messages with different keys, up to {@link MAX_TRANSACTION_ITEMS},
   * are one transaction. DynamoDB Streams keep no order among a transaction's items, so
   * messages sharing a key go in rounds: the n-th message of each key in round n, each round
   * a transaction committed after the one before, and their ids sort in the given order.
   * Refuses, before any write, what {@link publish} refuses; a failed round rejects with
   * {@link AwsResourceError}, and the rounds before it stay written.
   *
   * A message whose id is in the outbox already is taken as written, not written again: a
   * retry that gives every message the id it had (`requestEventIds`) writes only what the
   * failed attempt did not, each round still after the one before. (A transaction holding
   * such a `Put` is cancelled and DynamoDB hands back the row; it is sent again without it,
   * so a retry pays one refused call per transaction the failed attempt committed.)
   */
  async publishAll(messages: readonly OutgoingMessage[], opts?: PublishOptions): Promise<void> {
    const table = this.options.tableName;
    if (this.closed) throw new AwsResourceError('producer is closed', { resource: table });
    const timestamp = this.clock.now();
    // Random suffixes of one millisecond sort at random: sorted, the ids keep the given order.
    const fresh = messages.map(() => newEventId(timestamp)).sort();
    const rounds: Record<string, AttributeValue>[][] = [];
    const seen = new Map<string, number>();
    messages.forEach((message, index) => {
      const item = this.itemOf(message, message.id ?? fresh[index]!, timestamp, opts);
      const pk = item.pk?.S ?? '';
      const round = seen.get(pk) ?? 0;
      seen.set(pk, round + 1);
      if (round === rounds.length) rounds.push([]);
      rounds[round]!.push(item);
    });
    for (const round of rounds) {
      for (let i = 0; i < round.length; i += MAX_TRANSACTION_ITEMS) {
        await this.commit(round.slice(i, i + MAX_TRANSACTION_ITEMS));
      }
    }
  }

  /** Puts `items` in one transaction, less those already in the outbox (see {@link publishAll}). */
  private async commit(items: readonly Record<string, AttributeValue>[]): Promise<void> {
    const table = this.options.tableName;
    let rest = items;
    while (rest.length > 0) {
      const sending = rest;
      try {
        await awsCall(
          'TransactWriteItems',
          table,
          sending.map((item) => item.sk?.S ?? ''),
          () =>
            this.options.client.send(
              new TransactWriteItemsCommand({
                TransactItems: sending.map((Item) => ({
                  Put: {
                    TableName: table,
                    Item,
                    ConditionExpression: 'attribute_not_exists(pk)',
                    // The row that fails the condition: the proof that it was written.
                    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
                  },
                })),
              }),
            ),
        );
        return;
      } catch (error) {
        const written = writtenAlready(error);
        if (!written) throw error;
        rest = sending.filter((_, index) => !written.has(index));
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.scheduled) await this.scheduled;
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length > 0) await this.writeChunk(this.takeChunk());
    } finally {
      this.scheduled = undefined;
    }
  }

  /**
   * The next request: up to 25 items in publish order, at most one per partition. DynamoDB
   * applies a batch's items in no particular order (and may leave any unprocessed), so two
   * messages of one key in one request could reach the stream swapped; the later one waits
   * for the next request instead.
   */
  private takeChunk(): Pending[] {
    const chunk: Pending[] = [];
    const rest: Pending[] = [];
    const partitions = new Set<string>();
    for (const p of this.pending) {
      if (chunk.length < BATCH_WRITE_LIMIT && !partitions.has(p.pk)) {
        partitions.add(p.pk);
        chunk.push(p);
      } else {
        rest.push(p);
      }
    }
    this.pending = rest;
    return chunk;
  }

  private async writeChunk(chunk: Pending[]): Promise<void> {
    const table = this.options.tableName;
    const maxAttempts = this.options.maxAttempts ?? 8;
    let remaining = chunk;
    for (let attempt = 1; remaining.length > 0; attempt++) {
      let unprocessed: Record<string, AttributeValue>[];
      try {
        const out = await this.options.client.send(
          new BatchWriteItemCommand({
            RequestItems: { [table]: remaining.map((p) => ({ PutRequest: { Item: p.item } })) },
          }),
        );
        unprocessed = (out.UnprocessedItems?.[table] ?? []).flatMap((r) =>
          r.PutRequest?.Item ? [r.PutRequest.Item] : [],
        );
      } catch (cause) {
        const error = new AwsResourceError(`BatchWriteItem to ${table} failed`, {
          resource: table,
          ids: remaining.map((p) => p.id),
          cause,
        });
        for (const p of remaining) p.reject(error);
        return;
      }
      const left = new Set(unprocessed.map((item) => item.sk?.S));
      for (const p of remaining) if (!left.has(p.id)) p.resolve();
      remaining = remaining.filter((p) => left.has(p.id));
      if (remaining.length === 0) return;
      if (attempt >= maxAttempts) {
        const error = new AwsResourceError(
          `${remaining.length} item(s) unprocessed by ${table} after ${attempt} attempts`,
          { resource: table, ids: remaining.map((p) => p.id) },
        );
        for (const p of remaining) p.reject(error);
        return;
      }
      await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** attempt)));
    }
  }
}

/**
 * The indexes of a cancelled transaction's `Put`s whose row is in the outbox already, when
 * those are the only reason it was cancelled; else `undefined` (a failure to throw).
 */
function writtenAlready(error: unknown): Set<number> | undefined {
  const cause = error instanceof AwsResourceError ? error.cause : undefined;
  if (!(cause instanceof TransactionCanceledException)) return undefined;
  const written = new Set<number>();
  for (const [index, reason] of (cause.CancellationReasons ?? []).entries()) {
    if (reason.Code === 'None') continue;
    if (reason.Code !== 'ConditionalCheckFailed' || !reason.Item) return undefined;
    written.add(index);
  }
  return written.size > 0 ? written : undefined;
}
