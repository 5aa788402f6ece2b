import {
  type AttributeValue,
  CreateTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  type TransactWriteItem,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  checkOutboxRecord,
  type EventTypeLookup,
  eventTypeLookup,
} from '../../../events/checks.js';
import type { EventType } from '../../../events/event.js';
import { EncodeError, MessageFormatError } from '../../../kernel/errors.js';
import { OUTBOX_RETENTION_SECONDS } from '../../../kernel/limits.js';
import type { OutboxRecord, TxOutbox } from '../../../outbox/types.js';
import { awsCall } from '../call.js';

/** DynamoDB's item size limit. */
export const MAX_ITEM_BYTES = 400 * 1024;

/**
 * Two days: longer than the DynamoDB Stream's 24 h, so that every record the stream still
 * holds has its outbox row (TTL counts from the producer's clock, and may delete early) and a
 * relay failure can be replayed from the outbox (`replayRelayFailure`); and at least an
 * `Idempotency-Key`'s TTL, so that a retry finds the rows its first attempt wrote.
 */
const DEFAULT_RETENTION_SECONDS = OUTBOX_RETENTION_SECONDS;

/** Options of {@link DynamoOutbox}. */
export interface DynamoOutboxOptions {
  readonly tableName: string;
  /**
   * Seconds an outbox row is kept (TTL, from its `createdAt`). Keep it above the stream's
   * 24 h: a relay failure is replayed from the rows its stream records name; and at least
   * the `Idempotency-Key` TTL of a `POST /_broadcast` writing here (`DynamoRequestIds`).
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
export function lookupOf(options: DynamoOutboxOptions): EventTypeLookup | undefined {
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
