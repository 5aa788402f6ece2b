import {
  type DynamoDBClient,
  paginateQuery,
  type QueryCommandInput,
} from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { awsCall } from '../call.js';

/**
 * The items of a Query of `table`, page by page, unmarshalled; each page's call wrapped as
 * every call of the adapters is ({@link awsCall}, naming `id` in its error).
 */
export async function* queryPages(
  client: DynamoDBClient,
  table: string,
  id: string,
  input: Omit<QueryCommandInput, 'TableName'>,
): AsyncIterable<Record<string, unknown>[]> {
  const iterator = paginateQuery({ client }, { TableName: table, ...input })[
    Symbol.asyncIterator
  ]();
  while (true) {
    const page = await awsCall('Query', table, [id], () => iterator.next());
    if (page.done) return;
    yield (page.value.Items ?? []).map((item) => unmarshall(item));
  }
}
