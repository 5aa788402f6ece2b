import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { addFrameLimitMetrics, gateway, metrics, runtime } from './runtime';
import { withSecrets } from './secrets';

/**
 * Client frames (subscribe, history, whisper, presence, ...), from the frames FIFO queue that
 * the WebSocket API's `$default` route sends them to, grouped by connection: each connection's
 * frames are handled one after another, in the order API Gateway received them; different
 * connections' at the same time. The gateway answers every refused frame itself and never
 * throws, so no frame is reported failed: only an invocation that fails outright (a timeout)
 * returns its batch to the queue.
 */
export const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
  await withSecrets();
  const gw = gateway();
  const frames = [];
  for (const record of event.Records) {
    const connectionId = record.attributes.MessageGroupId;
    if (connectionId) frames.push({ connectionId, body: record.body });
    else
      runtime().logger.error('frame without a connection (no MessageGroupId)', {
        messageId: record.messageId,
      });
  }
  await gw.receiveInOrder(frames);
  const counts = gw.takeCounts();
  // Published only when the limit refused something: a metric line per frame costs.
  if (counts.rateLimitedFrames > 0) {
    const m = metrics();
    addFrameLimitMetrics(m, counts);
    m.publishStoredMetrics();
  }
  return { batchItemFailures: [] };
};
