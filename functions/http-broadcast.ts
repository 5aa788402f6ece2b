import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2 } from 'aws-lambda';
import {
  BroadcastEvent,
  EncodeError,
  hasBroadcastKey,
  LimitExceededError,
  MessageFormatError,
  parseBroadcastRequest,
  RemoteCommandEvent,
} from '../lib/core';
import { type runtime, codec as runtimeCodec, producer as runtimeProducer } from './runtime';
import { withSecrets } from './secrets';

/**
 * AnyCable's HTTP broadcast API, `POST /_broadcast` with `Authorization: Bearer <key>`.
 * Broadcasts are written to the outbox, so they take the path of every other event and
 * get offsets from the same sequence.
 */
export const handler = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyResultV2> => {
  const { config, logger } = await withSecrets();
  const authorization = event.headers?.authorization ?? event.headers?.Authorization;
  if (!hasBroadcastKey(authorization, [config.broadcastKey, config.broadcastPreviousKey])) {
    logger.warn('broadcast refused: missing or wrong key');
    return { statusCode: 401, body: 'unauthorized' };
  }
  const body =
    event.isBase64Encoded && event.body ? Buffer.from(event.body, 'base64').toString() : event.body;
  let items: ReturnType<typeof parseBroadcastRequest>;
  try {
    items = parseBroadcastRequest(body);
  } catch (error) {
    if (error instanceof LimitExceededError) return overLimit(error, logger);
    if (!(error instanceof MessageFormatError)) throw error;
    logger.warn('broadcast refused: malformed body', { reason: error.message });
    return { statusCode: 422, body: error.message };
  }
  let messages: Awaited<ReturnType<typeof encodeAll>>;
  try {
    messages = await encodeAll(items, runtimeCodec());
  } catch (error) {
    // A value the schema or the item size refuses is the client's, never a 500.
    if (!(error instanceof EncodeError)) throw error;
    logger.warn('broadcast refused: cannot encode', { reason: error.message });
    return { statusCode: 422, body: error.message };
  }
  const producer = runtimeProducer();
  // Published in request order: the producer keeps that order per stream.
  try {
    await Promise.all(messages.map((message) => producer.publish(message)));
  } catch (error) {
    // The producer refuses, before the write, what the relay could not send.
    if (error instanceof LimitExceededError) return overLimit(error, logger);
    if (!(error instanceof EncodeError)) throw error;
    logger.warn('broadcast refused: cannot encode', { reason: error.message });
    return { statusCode: 422, body: error.message };
  }
  logger.info('broadcast accepted', { items: items.length });
  return { statusCode: 201, body: '' };
};

/**
 * A value over a documented limit: 413 for a payload (body, data, command, SQS body), 422
 * for a key, with a JSON body naming the limit and the size.
 */
function overLimit(
  error: LimitExceededError,
  logger: ReturnType<typeof runtime>['logger'],
): APIGatewayProxyResultV2 {
  logger.warn('broadcast refused: over a limit', { reason: error.message });
  return {
    statusCode: error.kind === 'payload' ? 413 : 422,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      error: error.message,
      what: error.what,
      bytes: error.bytes,
      limit: error.limit,
    }),
  };
}

function encodeAll(
  items: ReturnType<typeof parseBroadcastRequest>,
  codec: ReturnType<typeof runtimeCodec>,
) {
  return Promise.all(
    items.map(async (item) =>
      item.kind === 'broadcast'
        ? {
            key: item.broadcast.stream,
            type: BroadcastEvent.name,
            value: await codec.encode(BroadcastEvent, item.broadcast),
          }
        : {
            key: RemoteCommandEvent.keyOf(item.command)!,
            type: RemoteCommandEvent.name,
            value: await codec.encode(RemoteCommandEvent, item.command),
          },
    ),
  );
}
