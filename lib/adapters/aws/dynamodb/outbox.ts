import {
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  checkOutboxRecord,
  type EventTypeLookup,
  eventTypeLookup,
} from '../../../events/checks.js';
import type { EventType } from '../../../events/event.js';
import { newEventId } from '../../../events/event-id.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { AwsResourceError, EncodeError, MessageFormatError } from '../../../kernel/errors.js';
import type {
  CloseableProducer,
  OutgoingMessage,
  PublishOptions,
} from '../../../messaging/types.js';
import type { OutboxRecord, TxOutbox } from '../../../outbox/types.js';
import { awsCall } from '../call.js';

/** DynamoDB's item size limit. */
export const MAX_ITEM_BYTES = 400 * 1024;

/**
 * Two days: longer than the DynamoDB Stream's 24 h, so that every record the stream still
 * holds has its outbox row (TTL counts from the producer's clock, and may delete early) and a
 * relay failure can be replayed from the outbox (`replayRelayFailure`).
 */
const DEFAULT_RETENTION_SECONDS = 172_800;

/** Options of {@link DynamoOutbox}. */
export interface DynamoOutboxOptions {
  readonly tableName: string;
  /**
   * Seconds an outbox row is kept (TTL, from its `createdAt`). Keep it above the stream's
   * 24 h: a relay failure is replayed from the rows its stream records name.
   * @default 172800
   */
  readonly retentionSeconds?: number;
  /**
   * Event types whose `check` this outbox applies to the raw records it writes (decoding the
   * payload with the type's schema), e.g. `[BroadcastEvent, RemoteCommandEvent]` so that a
   * broadcast over the frame limit is refused at `publish` as at `POST /_broadcast`. Events
   * sent with an `EventSender` are checked by the sender whatever this says; the SQS body
   * limit is checked for every record.
   * @default [] (no type-specific check)
   */
  readonly eventTypes?: readonly EventType<unknown>[];
}

/**
 * The outbox row of `record`. Refuses, before anything is written, a record that could be
 * committed but never relayed: `LimitExceededError` for an SQS body over `MAX_SQS_BODY_BYTES`
 * or a value its type's `check` refuses ({@link checkOutboxRecord}), {@link EncodeError}
 * for an item over DynamoDB's 400 KB.
 */
export function outboxItem(
  record: OutboxRecord,
  retentionSeconds = DEFAULT_RETENTION_SECONDS,
  types?: EventTypeLookup,
): Record<string, AttributeValue> {
  checkOutboxRecord(record, types);
  const item = marshall(
    {
      pk: `${record.topic}#${record.key}`,
      sk: record.id,
      topic: record.topic,
      key: record.key,
      type: record.type,
      // An empty map is left out: some stream readers hand it back as `{}`, not `{ M: {} }`.
      headers: Object.keys(record.headers).length > 0 ? record.headers : undefined,
      payload: record.payload,
      createdAt: record.timestamp,
      expiresAt: Math.floor(record.timestamp / 1000) + retentionSeconds,
    },
    { convertEmptyValues: false, removeUndefinedValues: true },
  );
  const size = itemSize(item);
  if (size > MAX_ITEM_BYTES) {
    throw new EncodeError(
      `outbox item for ${record.type || 'message'} ${record.id} is ${size} bytes, the DynamoDB limit is ${MAX_ITEM_BYTES}`,
      { eventType: record.type },
    );
  }
  return item;
}

/** Reads an outbox row (from a stream NEW_IMAGE) back into a record; throws {@link MessageFormatError}. */
export function recordFromItem(image: Record<string, AttributeValue>): OutboxRecord {
  const row = unmarshall(withoutEmptyValues(image));
  const { sk, topic, key, type, headers, createdAt } = row;
  // A Lambda event carries binary attributes as base64 strings, the SDK as bytes.
  const payload =
    typeof row.payload === 'string'
      ? new Uint8Array(Buffer.from(row.payload, 'base64'))
      : row.payload;
  if (
    typeof sk !== 'string' ||
    typeof topic !== 'string' ||
    typeof key !== 'string' ||
    !(payload instanceof Uint8Array)
  ) {
    throw new MessageFormatError(`malformed outbox row: ${String(row.pk)}/${String(sk)}`, {
      messageId: typeof sk === 'string' ? sk : undefined,
    });
  }
  return {
    id: sk,
    topic,
    key,
    type: typeof type === 'string' ? type : '',
    headers: (headers as Record<string, string> | undefined) ?? {},
    payload,
    timestamp: typeof createdAt === 'number' ? createdAt : 0,
  };
}

/** Drops attribute values that carry no type (`{}`), which unmarshall rejects. */
function withoutEmptyValues(image: Record<string, AttributeValue>): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const [name, value] of Object.entries(image)) {
    if (value && Object.keys(value).length > 0) out[name] = value;
  }
  return out;
}

/**
 * Adds the outbox `Put` for `record` to `tx`, a `TransactItems` list the caller commits
 * with its business items (`TransactWriteItemsCommand`).
 */
export function writeToOutbox(
  tx: TransactWriteItem[],
  options: DynamoOutboxOptions,
  record: OutboxRecord,
): void {
  tx.push({
    Put: {
      TableName: options.tableName,
      Item: outboxItem(record, options.retentionSeconds, lookupOf(options)),
      // Insert-only: an event id is written once.
      ConditionExpression: 'attribute_not_exists(pk)',
    },
  });
}

const lookups = new WeakMap<readonly EventType<unknown>[], EventTypeLookup>();

/** The lookup of `options.eventTypes`, built once per array. */
function lookupOf(options: DynamoOutboxOptions): EventTypeLookup | undefined {
  const types = options.eventTypes;
  if (!types || types.length === 0) return undefined;
  const known = lookups.get(types);
  if (known) return known;
  const lookup = eventTypeLookup(types);
  lookups.set(types, lookup);
  return lookup;
}

/**
 * The transactional outbox on DynamoDB: `sendInTx` adds a `Put` to the caller's
 * `TransactItems`. The caller commits (`TransactWriteItemsCommand`): the outbox never sees
 * the outcome, so a sender's file sink learns it from `EventSender.afterCommit(tx)`.
 */
export class DynamoOutbox implements TxOutbox<TransactWriteItem[]> {
  constructor(private readonly options: DynamoOutboxOptions) {}

  addToTx(tx: TransactWriteItem[], record: OutboxRecord): void {
    writeToOutbox(tx, this.options, record);
  }
}

/** Creates an outbox table (local use; production tables come from `serverless.yml`). */
export async function createOutbox(client: DynamoDBClient, name: string): Promise<void> {
  try {
    await awsCall('CreateTable', name, [name], () =>
      client.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [
            { AttributeName: 'pk', AttributeType: 'S' },
            { AttributeName: 'sk', AttributeType: 'S' },
          ],
          KeySchema: [
            { AttributeName: 'pk', KeyType: 'HASH' },
            { AttributeName: 'sk', KeyType: 'RANGE' },
          ],
          StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' },
        }),
      ),
    );
    await awsCall('UpdateTimeToLive', name, [name], () =>
      client.send(
        new UpdateTimeToLiveCommand({
          TableName: name,
          TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
        }),
      ),
    );
  } catch (error) {
    // The table exists already: nothing to create.
    if (!(error instanceof Error && error.cause instanceof ResourceInUseException)) throw error;
  }
}

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
      item = outboxItem(
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
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ item, id, pk: item.pk?.S ?? '', resolve, reject });
      // Collect what is published in the same tick into as few requests as possible.
      this.scheduled ??= new Promise<void>((r) => setImmediate(r)).then(() => this.flush());
    });
  }

  /**
   * Writes `messages` all or none, in `TransactWriteItems` (a `Put` per message), where
   * DynamoDB allows it: messages with different keys, up to {@link MAX_TRANSACTION_ITEMS},
   * are one transaction. DynamoDB Streams keep no order among a transaction's items, so
   * messages sharing a key go in rounds: the n-th message of each key in round n, each round
   * a transaction committed after the one before, and their ids sort in the given order.
   * Refuses, before any write, what {@link publish} refuses; a failed round rejects with
   * {@link AwsResourceError}, and the rounds before it stay written.
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
      const item = outboxItem(
        {
          id: message.id ?? fresh[index]!,
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
      const pk = item.pk?.S ?? '';
      const round = seen.get(pk) ?? 0;
      seen.set(pk, round + 1);
      if (round === rounds.length) rounds.push([]);
      rounds[round]!.push(item);
    });
    for (const round of rounds) {
      for (let i = 0; i < round.length; i += MAX_TRANSACTION_ITEMS) {
        const items = round.slice(i, i + MAX_TRANSACTION_ITEMS);
        await awsCall(
          'TransactWriteItems',
          table,
          items.map((item) => item.sk?.S ?? ''),
          () =>
            this.options.client.send(
              new TransactWriteItemsCommand({
                TransactItems: items.map((Item) => ({
                  Put: { TableName: table, Item, ConditionExpression: 'attribute_not_exists(pk)' },
                })),
              }),
            ),
        );
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

function itemSize(item: Record<string, AttributeValue>): number {
  let size = 0;
  for (const [name, value] of Object.entries(item))
    size += Buffer.byteLength(name) + valueSize(value);
  return size;
}

function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S);
  if (value.N !== undefined) return value.N.length;
  if (value.B !== undefined) return value.B.length;
  if (value.M !== undefined) return 3 + itemSize(value.M);
  if (value.L !== undefined) return 3 + value.L.reduce((n, v) => n + 1 + valueSize(v), 0);
  return 1;
}
