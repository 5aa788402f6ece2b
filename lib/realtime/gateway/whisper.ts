import { errorMessage, ProtocolError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { StreamDelivery } from '../fanout/fanout.js';
import type { Subscription } from '../ports.js';
import { whisperFrame } from '../protocol.js';

/**
 * Delivers a whisper (a transient message from a client, e.g. a typing indicator) to the
 * other subscribers of its stream whose own subscription allows whispers, never to the
 * sender, without a stream position. `subs`
 * are the sender's subscriptions of the identifier. Data that is not an object, or a stream
 * whispers are not allowed on, is thrown as a {@link ProtocolError}; failed posts are logged.
 */
export async function whisper(
  fanout: StreamDelivery,
  logger: Logger,
  connectionId: string,
  identifier: string,
  subs: readonly Subscription[],
  data: unknown,
): Promise<void> {
  if (typeof data !== 'object' || data === null) {
    throw new ProtocolError('whisper data must be an object', {
      connectionId,
      command: 'whisper',
      identifier,
    });
  }
  const sub = subs[0]!;
  if (!sub.whisper) {
    throw new ProtocolError(`whispers are not allowed on stream ${sub.stream}`, {
      connectionId,
      command: 'whisper',
      identifier,
    });
  }
  const report = await fanout.deliver(
    sub.stream,
    // Only to subscriptions that allow whispers themselves: a signed subscription of a stream
    // that is also public by name gets none unless whispers on signed streams are on.
    (other) => (other.whisper ? whisperFrame(other.identifier, data) : undefined),
    connectionId,
    // A typing indicator is not worth holding the sender's frame for later passes.
    { retry: false },
  );
  for (const f of report.failed) {
    logger.error('whisper: frame undelivered', {
      stream: sub.stream,
      connectionId: f.connectionId,
      error: errorMessage(f.error),
    });
  }
}
