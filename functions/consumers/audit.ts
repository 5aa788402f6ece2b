import { BroadcastEvent, RemoteCommandEvent } from '../../lib/core';
import { codec, consumer, runtime } from '../runtime';

/**
 * An example of your own consumer (the group `audit` in `infra/deploy/consumers.ts`): an
 * audit log of every broadcast and remote command, one JSON line each. Its ack state is in
 * the `acks` table, so a message delivered again after it was handled (a relay resend past
 * SQS's 5-minute deduplication, a crash before the delete) is acked without a second line.
 */
export const handler = consumer('audit', async (message) => {
  const { logger } = runtime();
  const entry = {
    id: message.id,
    partition: message.partition,
    offset: String(message.offset),
    receiveCount: message.receiveCount,
  };
  if (message.type === BroadcastEvent.name) {
    const { stream, data } = await codec().decode(message.value, BroadcastEvent);
    logger.info('audit broadcast', { ...entry, stream, bytes: Buffer.byteLength(data) });
  } else if (message.type === RemoteCommandEvent.name) {
    const { command } = await codec().decode(message.value, RemoteCommandEvent);
    logger.info('audit remote command', { ...entry, command });
  } else {
    // Not ours to judge: the broadcast consumer refuses it; the audit records it.
    logger.warn('audit unknown event type', { ...entry, type: message.type });
  }
});
