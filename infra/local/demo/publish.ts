/**
 * `npm run demo:publish -- --stream <name> --data <string> [--fail]`: what a service does.
 * Commits a demo business item and a broadcast event in one TransactWriteItems against
 * the local stack; with `--fail` the item's condition fails and nothing is broadcast.
 */
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../services';
import { commitDemoBroadcast } from './demo';

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

/** npm start's DynamoDB Local, or the one `LAMBDACABLE_DYNAMODB_ENDPOINT` names. */
function dynamodbEndpoint(env: Readonly<Record<string, string | undefined>>): string {
  return env.LAMBDACABLE_DYNAMODB_ENDPOINT || 'http://127.0.0.1:8000';
}

const dynamodb = new DynamoDBClient({
  endpoint: dynamodbEndpoint(process.env),
  region: LOCAL_REGION,
  credentials: LOCAL_CREDENTIALS,
});
const result = await commitDemoBroadcast({
  dynamodb,
  prefix: values.prefix!,
  stream: values.stream,
  data: values.data,
  fail: values.fail,
});
console.log(
  result.committed
    ? `committed ${result.orderId} and a broadcast to "${values.stream}" in one transaction`
    : `transaction cancelled (${result.reasons}): no order, no broadcast`,
);
dynamodb.destroy();
