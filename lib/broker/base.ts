import { StreamsTracker } from './streams-tracker.js';
import type {
  Broadcaster,
  Cacheable,
  RemoteCommandMessage,
  SessionCache,
  SessionUpdate,
} from './types.js';

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

/** A broker whose sessions live in a {@link SessionCache} of their own: it passes them through. */
export abstract class SessionKeeping extends SubscriptionTracking {
  protected abstract readonly sessions: SessionCache;

  async commitSession(sid: string, session: Cacheable): Promise<void> {
    await this.sessions.commitSession(sid, session);
  }

  async restoreSession(sid: string): Promise<Uint8Array | null> {
    return this.sessions.restoreSession(sid);
  }

  async updateSession(sid: string, update: SessionUpdate): Promise<boolean> {
    return this.sessions.updateSession(sid, update);
  }

  async finishSession(sid: string): Promise<void> {
    await this.sessions.finishSession(sid);
  }
}
