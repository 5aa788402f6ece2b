import {
  type AttributeValue,
  BatchGetItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import {
  historyFromRetained,
  lowestRetainedOffset,
  resolveBrokerConfig,
  type StoredMessage,
  type StreamMeta,
  toStreamMessage,
} from '../../../broker/history.js';
import {
  type BrokerConfig,
  defaultBrokerConfig,
  type HistoryReader,
  type StreamMessage,
} from '../../../broker/types.js';
import { type Clock, systemClock } from '../../../kernel/clock.js';
import { MAX_STREAM_BYTES, utf8Bytes } from '../../../kernel/limits.js';
import { awsCall } from '../call.js';

/** Options of {@link DynamoHistoryReader}. */
export interface DynamoHistoryReaderOptions {
  readonly client: DynamoDBClient;
  /** The `history` table: `pk` = stream, `sk` = offset; `sk` 0 is the stream's meta item. */
  readonly tableName: string;
  /** @default {@link defaultBrokerConfig} */
  readonly config?: Partial<BrokerConfig>;
  /** @default the system clock */
  readonly clock?: Clock;
}

/** The sort key of a stream's meta item. */
const META = 0;
/** The tries of a BatchGetItem's unprocessed keys, and the first back-off between them (ms). */
const BATCH_GET_ATTEMPTS = 8;
const BATCH_GET_BACKOFF_MS = 25;

/** The key of a stream's meta item (`sk` 0: offsets start at 1). */
export function metaKey(stream: string): Record<string, AttributeValue> {
  return marshall({ pk: stream, sk: META });
}
/** Keys per BatchGetItem, the DynamoDB maximum. */
const BATCH_GET_KEYS = 100;

/**
 * The history reads of {@link DynamoBroker} (the {@link HistoryReader} the WebSocket side
 * uses): the stream's meta item (`sk` 0), then its retained messages by `Query`, filtered on
 * `expiresAt` since TTL deletion lags.
 */
export class DynamoHistoryReader implements HistoryReader {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly config: BrokerConfig;
  private readonly clock: Clock;

  constructor(options: DynamoHistoryReaderOptions) {
    this.client = options.client;
    this.table = options.tableName;
    this.config = resolveBrokerConfig(defaultBrokerConfig(), options.config);
    this.clock = options.clock ?? systemClock;
  }

  async historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]> {
    const meta = await this.meta(stream);
    if (!meta || meta.epoch !== epoch || offset >= meta.lastOffset) {
      return historyFromRetained(stream, meta, epoch, offset, []);
    }
    const from = Math.max(offset + 1, lowestRetainedOffset(meta, this.config));
    const retained = await this.retained(stream, meta, from);
    return historyFromRetained(stream, meta, epoch, offset, retained);
  }

  async historySince(stream: string, tsSeconds: number): Promise<StreamMessage[]> {
    const meta = await this.meta(stream);
    if (!meta) return [];
    const retained = await this.retained(stream, meta, lowestRetainedOffset(meta, this.config));
    return retained
      .filter((m) => m.timestamp >= tsSeconds * 1000)
      .map((m) => toStreamMessage(stream, meta.epoch, m));
  }

  /**
   * The streams' `lastAt` from their meta items: BatchGetItem, 100 keys a request,
   * eventually consistent (the pinger reads again after a while anyway). Keys DynamoDB
   * leaves unprocessed are asked again with back-off; a stream still unread after that is
   * left out, as if it had no broadcast (its subscribers are pinged).
   */
  async lastBroadcastAt(streams: readonly string[]): Promise<Map<string, number>> {
    const table = this.table;
    const out = new Map<string, number>();
    // BatchGetItem refuses duplicate keys; a name over the limit was never appended.
    const names = [...new Set(streams)].filter((s) => s !== '' && utf8Bytes(s) <= MAX_STREAM_BYTES);
    for (let i = 0; i < names.length; i += BATCH_GET_KEYS) {
      const chunk = names.slice(i, i + BATCH_GET_KEYS);
      const id = chunk.length > 1 ? `${chunk[0]} and ${chunk.length - 1} more` : String(chunk[0]);
      let keys: Record<string, AttributeValue>[] = chunk.map(metaKey);
      for (let attempt = 0; keys.length > 0 && attempt < BATCH_GET_ATTEMPTS; attempt++) {
        const request = keys;
        const res = await awsCall('BatchGetItem', table, [id], () =>
          this.client.send(
            new BatchGetItemCommand({
              RequestItems: {
                [table]: {
                  Keys: request,
                  ProjectionExpression: 'pk, lastAt, expiresAt',
                  ConsistentRead: false,
                },
              },
            }),
          ),
        );
        const now = this.clock.now();
        for (const item of res.Responses?.[table] ?? []) {
          if (isExpired(item, now)) continue; // a forgotten stream: no broadcast known
          const stream = item.pk?.S;
          const lastAt = item.lastAt?.N;
          if (stream !== undefined && lastAt !== undefined) out.set(stream, Number(lastAt));
        }
        keys = res.UnprocessedKeys?.[table]?.Keys ?? [];
        if (keys.length > 0)
          await new Promise((r) => setTimeout(r, BATCH_GET_BACKOFF_MS * 2 ** attempt));
      }
    }
    return out;
  }

  /**
   * The stream's epoch and last offset (its meta item, read consistently); none once the
   * item is past its `expiresAt` (the stream was forgotten). @internal for DynamoBroker
   */
  async meta(stream: string): Promise<StreamMeta | undefined> {
    const out = await awsCall('GetItem', this.table, [stream], () =>
      this.client.send(
        new GetItemCommand({
          TableName: this.table,
          Key: metaKey(stream),
          ConsistentRead: true,
        }),
      ),
    );
    const epoch = out.Item?.epoch?.S;
    if (!epoch || isExpired(out.Item!, this.clock.now())) return undefined;
    return { epoch, lastOffset: Number(out.Item?.lastOffset?.N ?? '0') };
  }

  /** Whether one of the stream's retained messages was appended from `source`. @internal for DynamoBroker */
  async hasSource(stream: string, source: string, last: number): Promise<boolean> {
    const table = this.table;
    const fitsNumber = source.replace(/^0+/, '').length <= 38;
    const out = await awsCall('Query', table, [stream], () =>
      this.client.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :s AND sk BETWEEN :from AND :to',
          // A string; a message an older release wrote holds it as a number (at most 38
          // digits, so only a source that short can match one).
          FilterExpression: fitsNumber
            ? '#source = :source OR #source = :sourceN'
            : '#source = :source',
          ExpressionAttributeNames: { '#source': 'source' },
          ExpressionAttributeValues: {
            ...marshall({
              ':s': stream,
              ':from': Math.max(1, last - this.config.historyLimit + 1),
              ':to': last,
            }),
            ':source': { S: source },
            ...(fitsNumber ? { ':sourceN': { N: source } } : {}),
          },
          ConsistentRead: true,
        }),
      ),
    );
    return (out.Items?.length ?? 0) > 0;
  }

  private async retained(stream: string, meta: StreamMeta, from: number): Promise<StoredMessage[]> {
    const out: StoredMessage[] = [];
    const pages = paginateQuery(
      { client: this.client },
      {
        TableName: this.table,
        KeyConditionExpression: 'pk = :s AND sk BETWEEN :from AND :to',
        FilterExpression: 'expiresAt > :now',
        ExpressionAttributeValues: {
          ...marshall({
            ':s': stream,
            ':from': from,
            ':to': meta.lastOffset,
            ':now': this.clock.now() / 1000,
          }),
        },
        ConsistentRead: true,
      },
    );
    await awsCall('Query', this.table, [stream], async () => {
      for await (const page of pages) {
        for (const item of page.Items ?? []) {
          out.push({
            offset: Number(item.sk?.N),
            data: item.data?.S ?? '',
            timestamp: Number(item.ts?.N),
            expiresAt: Number(item.expiresAt?.N) * 1000,
          });
        }
      }
    });
    return out;
  }
}

/** Whether an item is past its `expiresAt` (seconds) at `now` (ms); one without it never expires. */
export function isExpired(item: Record<string, AttributeValue>, now: number): boolean {
  const expiresAt = item.expiresAt?.N;
  return expiresAt !== undefined && Number(expiresAt) * 1000 <= now;
}
