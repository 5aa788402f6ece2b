import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { type ConsumedMessage, consumeSqsBatch, NackError } from '../lib/aws';
import {
  BroadcastEvent,
  backoffSeconds,
  errorMessage,
  MessageFormatError,
  PresenceEvent,
  presenceMessage,
  RemoteCommandEvent,
  UnknownEventTypeError,
} from '../lib/core';
import {
  addFrameMetrics,
  deadLetterOf,
  delivery,
  runtime,
  codec as runtimeCodec,
  metrics as runtimeMetrics,
} from './runtime';

/**
 * No message of a batch starts with less time than this left (ms): a large audience's frame
 * waits for its fan-out tasks (about N / 10,000 s at the default `@connections` quota), so a
 * batch of them must never run into the timeout. The rest of the batch comes back at once.
 */
const START_RESERVE_MS = 200_000;

/**
 * Broadcast queue consumer: history (offset, epoch) in the broker, then fan-out; presence
 * changes fanned out as `presence` frames.
 */
export const handler = async (event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => {
  const { logger, sqs, queues } = runtime();
  const startBy = Date.now() + (context?.getRemainingTimeInMillis() ?? 900_000) - START_RESERVE_MS;
  const { broker, fanout } = delivery();
  const codec = runtimeCodec();
  const metrics = runtimeMetrics();
  const response = await consumeSqsBatch(
    event,
    async (message: ConsumedMessage) => {
      if (Date.now() > startBy) {
        // Not failed: redelivered with the rest of its group, in order, to a fresh invocation.
        throw new NackError(message.id, 'deferred: too little time left in this invocation');
      }
      if (message.type === BroadcastEvent.name) {
        const { stream, data } = await codec.decode(message.value, BroadcastEvent);
        // The offset makes a redelivery recognisable: history keeps one copy.
        await broker.handleBroadcast({
          stream,
          data,
          meta: { sourceOffset: message.offset.toString() },
        });
        logger.info('broadcast', { stream, offset: String(message.offset), id: message.id });
      } else if (message.type === PresenceEvent.name) {
        const value = await codec.decode(message.value, PresenceEvent);
        const presence = presenceMessage(value);
        if (!presence) {
          throw new MessageFormatError(`presence event of unknown kind: ${value.type}`, {
            messageId: message.id,
          });
        }
        // Transient: a `presence` frame to each subscriber, no history, no offset.
        await broker.handleBroadcast(presence);
        logger.info('presence', { stream: value.stream, type: value.type, id: message.id });
      } else if (message.type === RemoteCommandEvent.name) {
        const { command, payload } = await codec.decode(message.value, RemoteCommandEvent);
        await broker.handleCommand({ command, payload: parsePayload(payload, message.id) });
        logger.info('remote command', { command, id: message.id });
      } else {
        throw new UnknownEventTypeError(message.type);
      }
    },
    {
      group: 'broadcast',
      // No ack store: the broker's source position is the one redelivery check here (it
      // is read with the stream's counter anyway; an ack state would cost two more calls).
      logger,
      visibility: {
        sqs,
        queueUrl: () => queues.broadcast!,
        // A deferred message comes back at once; a failed one after 2 s doubling, at most 120.
        backoffSeconds: (n) => (Date.now() > startBy ? 0 : backoffSeconds(n)),
      },
      // Undecodable, an unknown event type, a command payload that is not JSON: parked in
      // the DLQ at once, the stream's later broadcasts go on.
      ...deadLetterOf('broadcast'),
    },
  );
  const failed = response.batchItemFailures.length;
  metrics.addMetric(
    'consumedMessages',
    MetricUnit.Count,
    event.Records.length - failed - response.parked,
  );
  metrics.addMetric('failedMessages', MetricUnit.Count, failed);
  metrics.addMetric('parkedMessages', MetricUnit.Count, response.parked);
  addFrameMetrics(metrics, fanout.takeCounts());
  metrics.publishStoredMetrics();
  return response;
};

/** A remote command's JSON payload; not JSON throws a MessageFormatError naming the message. */
function parsePayload(payload: string, messageId: string): unknown {
  try {
    return JSON.parse(payload) as unknown;
  } catch (cause) {
    throw new MessageFormatError(`remote command payload is not JSON: ${errorMessage(cause)}`, {
      messageId,
      cause,
    });
  }
}
