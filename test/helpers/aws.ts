import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import type { ConsumerGroupDefinition } from '../../infra/deploy/consumers';
import { createLocalResources, type LocalResources } from '../../infra/local/resources';

const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };

/** SDK clients for the emulators the global setup started. */
export function localClients(): { dynamodb: DynamoDBClient; sqs: SQSClient } {
  return {
    dynamodb: new DynamoDBClient({
      endpoint: inject('dynamodbEndpoint'),
      region: 'us-east-1',
      credentials,
    }),
    sqs: new SQSClient({ endpoint: inject('sqsEndpoint'), region: 'us-east-1', credentials }),
  };
}

let counter = 0;
/** A resource prefix no other test file uses. */
export function uniquePrefix(label: string): string {
  counter++;
  return `t${process.pid}-${label}-${counter}-${Date.now().toString(36)}`;
}

/** Tables and queues of their own for one test file. */
export async function testResources(
  label: string,
  consumerGroups?: readonly ConsumerGroupDefinition[],
): Promise<LocalResources & ReturnType<typeof localClients> & { prefix: string }> {
  const clients = localClients();
  const prefix = uniquePrefix(label);
  const resources = await createLocalResources({
    ...clients,
    prefix,
    ...(consumerGroups ? { consumerGroups } : {}),
  });
  return { ...clients, ...resources, prefix };
}
