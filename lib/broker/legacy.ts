import { HistoryError } from '../kernel/errors.js';
import { SubscriptionTracking } from './base.js';
import type { Broadcaster, Broker, Cacheable, StreamMessage } from './types.js';

/** A broker without history or sessions: messages pass straight to the broadcaster. */
export class LegacyBroker extends SubscriptionTracking implements Broker {
  constructor(options: { broadcaster: Broadcaster }) {
    super(options.broadcaster);
  }

  async start(): Promise<void> {}

  async shutdown(): Promise<void> {}

  announce(): string {
    return 'Using no broker (history and sessions not supported)';
  }

  async handleBroadcast(msg: StreamMessage): Promise<void> {
    await this.broadcaster.broadcast(msg);
  }

  async historyFrom(stream: string, epoch: string, offset: number): Promise<StreamMessage[]> {
    throw new HistoryError('history not supported', { stream, epoch, offset });
  }

  async historySince(stream: string, _tsSeconds: number): Promise<StreamMessage[]> {
    throw new HistoryError('history not supported', { stream });
  }

  async commitSession(_sid: string, _session: Cacheable): Promise<void> {}

  async restoreSession(_sid: string): Promise<Uint8Array | null> {
    return null;
  }

  async finishSession(_sid: string): Promise<void> {}
}
