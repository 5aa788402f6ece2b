/**
 * `npm run demo:publish -- --stream <name> --data <string> [--fail]`: what a service does.
 * Commits a demo business item and a broadcast event in one TransactWriteItems against
 * the local stack; with `--fail` the item's condition fails and nothing is broadcast.
 */
import { parseArgs } from 'node:util';
import {
  CreateTableCommand,
  DynamoDBClient,
  ResourceInUseException,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import {
  BroadcastEvent,
  createEventSender,
  DynamoOutbox,
  DynamoSchemaRegistry,
  EventTopics,
  newEventId,
} from '../lib';
import { tableName } from './definitions';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './local-services';

const { values } = parseArgs({
  options: {
    stream: { type: 'string' },
    data: { type: 'string' },
    fail: { type: 'boolean', default: false },
    prefix: { type: 'string', default: 'lambdacable-local' },
  },
});
if (!values.stream || values.data === undefined) {
  console.error('usage: npm run demo:publish -- --stream <name> --data <string> [--fail]');
  process.exit(2);
}

const endpoint = process.env.LAMBDACABLE_DYNAMODB_ENDPOINT || 'http://127.0.0.1:8000';
const dynamodb = new DynamoDBClient({
  endpoint,
  region: LOCAL_REGION,
  credentials: LOCAL_CREDENTIALS,
});
const prefix = values.prefix!;
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
  registry: new DynamoSchemaRegistry({ client: dynamodb, tableName: tableName(prefix, 'schemas') }),
  outbox: new DynamoOutbox({ tableName: tableName(prefix, 'outbox') }),
}).initialize();

const orderId = `order-${newEventId(Date.now())}`;
const tx: TransactWriteItem[] = [
  {
    Put: {
      TableName: orders,
      Item: { pk: { S: orderId }, stream: { S: values.stream } },
      // --fail: demand an item that does not exist, so the whole transaction is cancelled.
      ConditionExpression: values.fail ? 'attribute_exists(pk)' : 'attribute_not_exists(pk)',
    },
  },
];
await sender.sendInTx(tx, BroadcastEvent.of({ stream: values.stream, data: values.data }));
try {
  await dynamodb.send(new TransactWriteItemsCommand({ TransactItems: tx }));
  console.log(`committed ${orderId} and a broadcast to "${values.stream}" in one transaction`);
} catch (error) {
  if (!(error instanceof TransactionCanceledException)) throw error;
  const reasons = error.CancellationReasons?.map((r) => r.Code).join(', ');
  console.log(`transaction cancelled (${reasons}): no item, no broadcast`);
}
dynamodb.destroy();
