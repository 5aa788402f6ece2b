import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createLocalResources, type LocalResources } from '../infra/local/resources';
import { LOCAL_CREDENTIALS, LOCAL_REGION, startDynamoDBLocal } from '../infra/local/services';

/**
 * Runs `fn` on a DynamoDB Local of its own with the project's tables (named with `prefix`),
 * then stops it: the sections that measure DynamoDB alone, without the stack.
 */
export async function withDynamoDBLocal<T>(
  prefix: string,
  fn: (dynamodb: DynamoDBClient, tables: LocalResources['tables']) => Promise<T>,
): Promise<T> {
  const ddb = await startDynamoDBLocal();
  const dynamodb = new DynamoDBClient({
    endpoint: ddb.endpoint,
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    const { tables } = await createLocalResources({ dynamodb, prefix });
    return await fn(dynamodb, tables);
  } finally {
    dynamodb.destroy();
    await ddb.stop();
  }
}
