import { StreamsTracker } from './streams-tracker.js';
import type { Broadcaster, RemoteCommandMessage } from './types.js';

/** Subscription tracking and command pass-through shared by every broker. */
export abstract class SubscriptionTracking {
  protected readonly tracker = new StreamsTracker();

  constructor(protected readonly broadcaster: Broadcaster) {}

  async subscribe(stream: string): Promise<string> {
    if (this.tracker.add(stream)) await this.broadcaster.subscribe(stream);
    return stream;
  }

  async unsubscribe(stream: string): Promise<string> {
    if (this.tracker.remove(stream)) await this.broadcaster.unsubscribe(stream);
    return stream;
  }

  async handleCommand(cmd: RemoteCommandMessage): Promise<void> {
    await this.broadcaster.broadcastCommand(cmd);
  }
}
