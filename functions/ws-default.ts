import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { gateway } from './runtime';
import { withSecrets } from './secrets';

/** `$default`: every client frame (subscribe, history, whisper, ...). */
export const handler = async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
  const rt = await withSecrets();
  await gateway().receive(
    event.requestContext.connectionId!,
    event.body ?? '',
    rt.managementEndpoint(event.requestContext),
  );
  return { statusCode: 200, body: '' };
};
