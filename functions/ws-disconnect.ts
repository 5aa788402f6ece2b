import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { gateway } from './runtime';

/** `$disconnect`: finishes the session (its TTL starts) and removes the connection. */
export const handler = async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
  await gateway().disconnect(event.requestContext.connectionId!);
  return { statusCode: 200, body: '' };
};
