import type { TestProject } from 'vitest/node';
import { startDynamoDBLocal, startSqsLocal } from '../infra/local/services';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
    sqsEndpoint: string;
  }
}

/** Starts DynamoDB Local and fauxqs once per test run, on 127.0.0.1, and always stops them. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started: { stop(): Promise<void> }[] = [];
  const teardown = async () => {
    await Promise.allSettled(started.map((s) => s.stop()));
  };
  try {
    const [dynamodb, sqs] = await Promise.all([
      startDynamoDBLocal().then((s) => {
        started.push(s);
        return s;
      }),
      startSqsLocal().then((s) => {
        started.push(s);
        return s;
      }),
    ]);
    project.provide('dynamodbEndpoint', dynamodb.endpoint);
    project.provide('sqsEndpoint', sqs.endpoint);
  } catch (error) {
    await teardown();
    throw error;
  }
  return teardown;
}
