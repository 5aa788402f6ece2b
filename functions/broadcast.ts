import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { type ConsumedMessage, consumeSqsBatch } from '../lib/aws';
import {
  BroadcastEvent,
  errorMessage,
  MessageFormatError,
  RemoteCommandEvent,
  UnknownEventTypeError,
} from '../lib/core';
import { delivery, runtime, codec as runtimeCodec, metrics as runtimeMetrics } from './runtime';

/** Broadcast queue consumer: history (offset, epoch) in the broker, then fan-out. */
export const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
  const { logger, sqs, queues } = runtime();
  const { broker, fanout } = delivery();
  const codec = runtimeCodec();
  const metrics = runtimeMetrics();
  const response = await consumeSqsBatch(
    event,
    async (message: ConsumedMessage) => {
      if (message.type === BroadcastEvent.name) {
        const { stream, data } = await codec.decode(message.value, BroadcastEvent);
        // The offset makes a redelivery recognisable: history keeps one copy.
        await broker.handleBroadcast({
          stream,
          data,
          meta: { sourceOffset: message.offset.toString() },
        });
        logger.info('broadcast', { stream, offset: String(message.offset), id: message.id });
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
      visibility: { sqs, queueUrl: () => queues.broadcast! },
    },
  );
  const failed = response.batchItemFailures.length;
  metrics.addMetric('consumedMessages', MetricUnit.Count, event.Records.length - failed);
  metrics.addMetric('failedMessages', MetricUnit.Count, failed);
  // Every frame given up on is counted here and logged with its connection and stream.
  const frames = fanout.takeCounts();
  metrics.addMetric('deliveredFrames', MetricUnit.Count, frames.delivered);
  metrics.addMetric('undeliveredFrames', MetricUnit.Count, frames.undelivered);
  metrics.addMetric('retriedPosts', MetricUnit.Count, frames.retried);
  metrics.addMetric('redeliveredFrames', MetricUnit.Count, frames.redelivered);
  metrics.addMetric('goneConnections', MetricUnit.Count, frames.gone);
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
