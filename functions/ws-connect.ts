import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { ConnectResult } from '../lib/core';
import { errorMessage } from '../lib/core';
import { gateway } from './runtime';
import { withSecrets } from './secrets';

/**
 * `$connect`: negotiates the subprotocol, identifies the client and stores the connection.
 * API Gateway cannot post during `$connect`, so `welcome` (or the `unauthorized`
 * disconnect) is delivered by the pinger, which reads new connections a few times a second.
 */
export const handler = async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
  const rt = await withSecrets();
  const connectionId = event.requestContext.connectionId!;
  const endpoint = rt.managementEndpoint(event.requestContext);
  let result: ConnectResult;
  try {
    result = await gateway().connect({
      connectionId,
      endpoint,
      query: event.queryStringParameters ?? {},
      protocols: header(event.headers, 'sec-websocket-protocol'),
    });
  } catch (error) {
    // A failed handshake gets no $disconnect: nothing else would remove what was stored.
    await gateway()
      .disconnect(connectionId)
      .catch((cleanup: unknown) =>
        rt.logger.error('connect: cleanup after a failure failed', {
          connectionId,
          error: errorMessage(cleanup),
        }),
      );
    throw error;
  }
  return connectResponse(result);
};

/**
 * The `$connect` response: API Gateway completes the handshake only when it answers the
 * client's `Sec-WebSocket-Protocol` with the chosen subprotocol.
 */
export function connectResponse(result: ConnectResult): APIGatewayProxyResult {
  return {
    statusCode: result.statusCode,
    headers: result.protocol ? { 'Sec-WebSocket-Protocol': result.protocol } : {},
    body: '',
  };
}

function header(
  headers: Record<string, string | undefined> | null,
  name: string,
): string | undefined {
  for (const [key, value] of Object.entries(headers ?? {})) {
    if (key.toLowerCase() === name) return value;
  }
  return undefined;
}
