import {
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  paginateScan,
} from '@aws-sdk/client-dynamodb';
import { DynamoConnectionStore } from '../lib/aws';
import { signStreamName } from '../lib/core';
import { type CapacityMeter, eventualReadUnits, itemBytes, meterCapacity } from './capacity';
import { withDynamoDBLocal } from './dynamodb-local';
import type { Figure } from './util';
import { inWaves, signedIdentifier } from './ws-clients';

const CONNECTIONS = 10_000;
const STREAMS = 100;
const PREFIX = 'bench-fanout';
const SAMPLE_TABLE = `${PREFIX}-sample-chat-connections`;

/** An API Gateway-like connection id (16 characters, base64, as `L0SM9cOFvHcCIhw=`). */
function connectionId(i: number): string {
  return `${Buffer.from(`bench${String(i).padStart(6, '0')}`)
    .toString('base64')
    .slice(0, 15)}=`;
}

/** Read units of a meter: DynamoDB Local's, and AWS's rule applied to the items' sizes. */
function units(meter: CapacityMeter): {
  reported: number;
  bySize: number;
  items: number;
  pages: number;
  bytesPerItem: number;
} {
  const items = meter.pages.reduce((n, page) => n + page.length, 0);
  return {
    reported: meter.units,
    bySize: meter.pages.reduce((n, page) => n + eventualReadUnits(sizeOf(page)), 0),
    items,
    pages: meter.pages.length,
    bytesPerItem: Math.round(sizeOf(meter.pages.flat()) / Math.max(1, items)),
  };
}

function sizeOf(items: readonly Record<string, AttributeValue>[]): number {
  return items.reduce((n, item) => n + itemBytes(item), 0);
}

/**
 * Read units one broadcast costs to find its subscribers, on one DynamoDB Local:
 * `CONNECTIONS` connections over `STREAMS` streams, written with our adapter
 * (`putConnection`, `addSubscription`) into the connections table of `infra/deploy/definitions.ts`;
 * our fan-out is one `byStreamShard` Query of the stream's subscribers. The reference is the AWS
 * sample chat app (aws-samples/simple-websockets-chat-app), which Scans its whole
 * connections table (items of `connectionId` only) for every message.
 */
export async function benchFanoutReads(): Promise<Figure[]> {
  return withDynamoDBLocal(PREFIX, async (dynamodb, tables) => {
    await dynamodb.send(
      new CreateTableCommand({
        TableName: SAMPLE_TABLE,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'connectionId', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'connectionId', KeyType: 'HASH' }],
      }),
    );
    const store = new DynamoConnectionStore({ client: dynamodb, tableName: tables.connections });
    const identifiers = Array.from({ length: STREAMS }, (_, s) =>
      signedIdentifier(signStreamName(`room/${s}`, 'bench-streams-secret')),
    );
    const endpoint = 'https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod';
    const written = await inWaves(
      Array.from({ length: CONNECTIONS }, (_, i) => i),
      32,
      async (i) => {
        const id = connectionId(i);
        await store.putConnection({
          connectionId: id,
          identity: `user-${i}`,
          sid: crypto.randomUUID(),
          protocol: 'actioncable-v1-ext-json',
          connectedAt: Date.now(),
          endpoint,
        });
        await store.addSubscription({
          connectionId: id,
          stream: `room/${i % STREAMS}`,
          identifier: identifiers[i % STREAMS]!,
          whisper: false,
          endpoint,
        });
      },
    );
    const failed = written.filter((o) => o.status === 'rejected').length;
    if (failed > 0) throw new Error(`fan-out reads bench: ${failed} connections not written`);
    for (let i = 0; i < CONNECTIONS; i += 25) {
      await dynamodb.send(
        new BatchWriteItemCommand({
          RequestItems: {
            [SAMPLE_TABLE]: Array.from({ length: Math.min(25, CONNECTIONS - i) }, (_, j) => ({
              PutRequest: { Item: { connectionId: { S: connectionId(i + j) } } },
            })),
          },
        }),
      );
    }

    const meter = meterCapacity(dynamodb);
    meter.reset();
    let subscribers = 0;
    for await (const page of store.subscribersOf('room/0')) subscribers += page.length;
    const ours = units(meter);

    meter.reset();
    let scanned = 0;
    for await (const page of paginateScan(
      { client: dynamodb },
      // The sample's sendmessage handler: scan({ TableName, ProjectionExpression: 'connectionId' }).
      { TableName: SAMPLE_TABLE, ProjectionExpression: 'connectionId' },
    )) {
      scanned += page.Items?.length ?? 0;
    }
    const sample = units(meter);

    const reportedBoth = ours.reported > 0 && sample.reported > 0;
    const o = reportedBoth ? ours.reported : ours.bySize;
    const s = reportedBoth ? sample.reported : sample.bySize;
    const source = reportedBoth
      ? 'ReturnConsumedCapacity TOTAL from DynamoDB Local'
      : 'DynamoDB Local reported no capacity: units from item sizes (AWS rules)';
    const rru = (n: number) => `${n.toFixed(1)} RRU`;
    return [
      {
        name: `Read units per broadcast, ${CONNECTIONS.toLocaleString('en-US')} connections / ${STREAMS} streams`,
        value: rru(o),
        reference: `${rru(s)} sample chat Scan`,
        ratio: `${(o / s).toFixed(3)}x (${(s / o).toFixed(0)}x fewer)`,
        extra: source,
      },
      {
        name: '  byStreamShard Query of one stream (ours)',
        value: `${subscribers} items`,
        reference: `${ours.pages} pages`,
        ratio: '-',
        extra: `by item size: ${rru(ours.bySize)} (${ours.bytesPerItem} B/item)`,
      },
      {
        name: '  Scan of the whole table (aws-samples chat app)',
        value: `${scanned} items`,
        reference: `${sample.pages} pages`,
        ratio: '-',
        extra: `by item size: ${rru(sample.bySize)} (${sample.bytesPerItem} B/item)`,
      },
    ];
  });
}
