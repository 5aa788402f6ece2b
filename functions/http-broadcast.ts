import {
  IdempotencyAlreadyInProgressError,
  IdempotencyValidationError,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import {
  BroadcastEvent,
  EncodeError,
  hasBroadcastKey,
  IdempotencyKeyReusedError,
  type ItemOrigin,
  LimitExceededError,
  MessageFormatError,
  parseBroadcastRequest,
  parseIdempotencyKey,
  RemoteCommandEvent,
  requestEventIds,
  requestFingerprint,
  withOrderedDisconnects,
} from '../lib/core';
import { idempotency, requestIds } from './idempotency';
import {
  connectionReader,
  runtime,
  codec as runtimeCodec,
  producer as runtimeProducer,
} from './runtime';
import { withSecrets } from './secrets';

type Items = ReturnType<typeof parseBroadcastRequest>;
type Messages = Awaited<ReturnType<typeof encodeAll>>;

/** What a request's `Idempotency-Key` record is keyed on (`key`) and checked against (`items`). */
interface IdempotentRequest {
  /**
   * The caller, if an authorizer named one, and the header: one caller's keys are its own;
   * `''` without the header.
   */
  readonly key: string;
  readonly items: Items;
  /** Where each message comes from in `items` (`withOrderedDisconnects`): its event id's part. */
  readonly origins: readonly ItemOrigin[];
}

/**
 * AnyCable's HTTP broadcast API, `POST /_broadcast` with `Authorization: Bearer <key>`.
 * Broadcasts are written to the outbox, so they take the path of every other event and
 * get offsets from the same sequence. A remote `disconnect` is written after a targeted
 * `unsubscribe` of each stream its target holds (`withOrderedDisconnects`). A request's items are written all or none where
 * DynamoDB allows it (`OutboxProducer.publishAll`). With an `Idempotency-Key` header, a
 * repeat within `LAMBDACABLE_IDEMPOTENCY_TTL` gets the first answer and writes nothing
 * (Powertools Idempotency): 422 if its body differs, 409 while the first is in progress; and
 * a retry of a failed request writes only what the failed attempt did not (`write`).
 */
export const handler = async (
  event: APIGatewayProxyEventV2,
  context?: Context,
): Promise<APIGatewayProxyResultV2> => {
  const { config, logger } = await withSecrets();
  const authorization = header(event, 'authorization');
  if (!hasBroadcastKey(authorization, [config.broadcastKey, config.broadcastPreviousKey])) {
    logger.warn('broadcast refused: missing or wrong key');
    return { statusCode: 401, body: 'unauthorized' };
  }
  let key: string | undefined;
  try {
    key = parseIdempotencyKey(header(event, 'idempotency-key'));
  } catch (error) {
    if (!(error instanceof MessageFormatError)) throw error;
    logger.warn('broadcast refused: bad Idempotency-Key', { reason: error.message });
    return { statusCode: 400, body: error.message };
  }
  const body =
    event.isBase64Encoded && event.body ? Buffer.from(event.body, 'base64').toString() : event.body;
  let items: Items;
  try {
    items = parseBroadcastRequest(body);
  } catch (error) {
    if (error instanceof LimitExceededError) return overLimit(error, logger);
    if (!(error instanceof MessageFormatError)) throw error;
    logger.warn('broadcast refused: malformed body', { reason: error.message });
    return { statusCode: 422, body: error.message };
  }
  // A remote `disconnect` is committed after a targeted `unsubscribe` of each stream its
  // target holds, so that no broadcast committed after it reaches the target.
  const ordered = await withOrderedDisconnects(connectionReader(), items);
  if (ordered.unordered > 0) {
    logger.warn('remote disconnect: streams past the limit are not put in order', {
      unordered: ordered.unordered,
    });
  }
  let messages: Messages;
  try {
    messages = await encodeAll(ordered.items, runtimeCodec());
  } catch (error) {
    // A value the schema or the item size refuses is the client's, never a 500.
    if (!(error instanceof EncodeError)) throw error;
    logger.warn('broadcast refused: cannot encode', { reason: error.message });
    return { statusCode: 422, body: error.message };
  }
  const { origins } = ordered;
  if (key === undefined) return write({ key: '', items, origins }, messages);
  const { config: idempotencyConfig } = idempotency();
  // The record's in-progress lock ends when this invocation would time out.
  if (context) idempotencyConfig.registerLambdaContext(context);
  try {
    return await idempotentWrite()({ key: `${callerOf(event)}#${key}`, items, origins }, messages);
  } catch (error) {
    // Powertools' record of the first body, or, after that attempt failed, its id base's.
    if (error instanceof IdempotencyValidationError || error instanceof IdempotencyKeyReusedError) {
      logger.warn('broadcast refused: Idempotency-Key reused with another body');
      return { statusCode: 422, body: 'Idempotency-Key was used with a different body' };
    }
    if (error instanceof IdempotencyAlreadyInProgressError) {
      logger.warn('broadcast refused: a request with this Idempotency-Key is in progress');
      return {
        statusCode: 409,
        body: 'a request with this Idempotency-Key is in progress: retry later',
      };
    }
    throw error;
  }
};

/**
 * Writes a request's messages: 201, or the refusal of a value the producer checks before
 * the write. A failed write throws (500), and an Idempotency-Key's record is then deleted,
 * so a retry runs again. Under a key, each message's event id is the same on every attempt
 * (`requestEventIds` on the first attempt's id base, kept by `requestIds`), so the retry
 * writes only what is missing: the outbox refuses an id written already. Without a key, a
 * failed request may have written its first rounds (see `OutboxProducer.publishAll`).
 */
async function write(request: IdempotentRequest, messages: Messages) {
  const { logger } = runtime();
  try {
    const ids =
      request.key === ''
        ? undefined
        : requestEventIds(
            await requestIds().claim(request.key, requestFingerprint(request.items)),
            messages,
            request.origins,
          );
    await runtimeProducer().publishAll(
      ids ? messages.map((m, i) => ({ ...m, id: ids[i] })) : messages,
    );
  } catch (error) {
    // The producer refuses, before the write, what the relay could not send.
    if (error instanceof LimitExceededError) return overLimit(error, logger);
    if (!(error instanceof EncodeError)) throw error;
    logger.warn('broadcast refused: cannot encode', { reason: error.message });
    return { statusCode: 422, body: error.message };
  }
  logger.info('broadcast accepted', { items: messages.length });
  return { statusCode: 201, body: '' };
}

let idempotent: typeof write | undefined;

/** {@link write} under the request's Idempotency-Key record, built once per instance. */
function idempotentWrite(): typeof write {
  idempotent ??= makeIdempotent(write, {
    ...idempotency(),
    keyPrefix: 'lambdacable.broadcast',
    dataIndexArgument: 0,
  });
  return idempotent;
}

/** A request header, whatever its case (API Gateway's HTTP API lowercases, others may not). */
function header(event: APIGatewayProxyEventV2, name: string): string | undefined {
  const headers = event.headers ?? {};
  if (headers[name] !== undefined) return headers[name];
  const found = Object.keys(headers).find((h) => h.toLowerCase() === name);
  return found === undefined ? undefined : headers[found];
}

/**
 * The authenticated caller, when an authorizer of the route named one (IAM, JWT or a Lambda
 * authorizer); else empty: the broadcast key is one for all callers.
 */
function callerOf(event: APIGatewayProxyEventV2): string {
  const authorizer = (
    event.requestContext as
      | {
          authorizer?: {
            iam?: { userArn?: unknown };
            jwt?: { claims?: { sub?: unknown } };
            lambda?: { principalId?: unknown };
          };
        }
      | undefined
  )?.authorizer;
  const caller =
    authorizer?.iam?.userArn ?? authorizer?.jwt?.claims?.sub ?? authorizer?.lambda?.principalId;
  return typeof caller === 'string' ? caller : '';
}

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

function encodeAll(items: Items, codec: ReturnType<typeof runtimeCodec>) {
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
