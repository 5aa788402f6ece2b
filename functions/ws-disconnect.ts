import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { runtime } from './runtime';

/** `$disconnect`: finishes the session (its TTL starts) and removes the connection. */
export const handler = async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
  await runtime().gateway.disconnect(event.requestContext.connectionId!);
  return { statusCode: 200, body: '' };
};
