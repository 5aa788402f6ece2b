import {
  CreateTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoOutbox, DynamoSchemaRegistry } from '../../../lib/aws';
import { BroadcastEvent, createEventSender, EventTopics, newEventId } from '../../../lib/core';
import { tableName } from '../../deploy/names';

/** What {@link commitDemoBroadcast} did. */
export type DemoResult =
  | { readonly committed: true; readonly orderId: string }
  | { readonly committed: false; readonly orderId: string; readonly reasons: string };

/**
 * What a service does: commits a business item (a demo order) and a broadcast event in one
 * `TransactWriteItems`. With `fail` the order's condition fails, so the transaction is
 * cancelled and no event exists, ever.
 */
export async function commitDemoBroadcast(options: {
  readonly dynamodb: DynamoDBClient;
  /** Resource prefix of the stack, e.g. `lambdacable-local`. */
  readonly prefix: string;
  readonly stream: string;
  readonly data: string;
  readonly fail?: boolean;
}): Promise<DemoResult> {
  const { dynamodb, prefix } = options;
  const orders = `${prefix}-demo-orders`;
  try {
    await dynamodb.send(
      new CreateTableCommand({
        TableName: orders,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  const sender = await createEventSender<TransactWriteItem[]>({
    topics: new EventTopics().register(BroadcastEvent),
    registry: new DynamoSchemaRegistry({
      client: dynamodb,
      tableName: tableName(prefix, 'schemas'),
    }),
    outbox: new DynamoOutbox({ tableName: tableName(prefix, 'outbox') }),
  }).initialize();

  const orderId = `order-${newEventId(Date.now())}`;
  const tx: TransactWriteItem[] = [
    {
      Put: {
        TableName: orders,
        Item: { pk: { S: orderId }, stream: { S: options.stream } },
        // fail: demand an order that does not exist, so the whole transaction is cancelled.
        ConditionExpression: options.fail ? 'attribute_exists(pk)' : 'attribute_not_exists(pk)',
      },
    },
  ];
  await sender.sendInTx(tx, BroadcastEvent.of({ stream: options.stream, data: options.data }));
  try {
    await dynamodb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
    return { committed: true, orderId };
  } catch (error) {
    if (!(error instanceof TransactionCanceledException)) throw error;
    const reasons = (error.CancellationReasons ?? []).map((r) => r.Code).join(', ');
    return { committed: false, orderId, reasons };
  }
}
