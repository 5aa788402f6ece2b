import type { Broadcaster, RemoteCommandMessage, StreamMessage } from '../../lib/core';

/** A broadcaster that records what it is given. */
export class RecordingBroadcaster implements Broadcaster {
  readonly messages: StreamMessage[] = [];
  readonly commands: RemoteCommandMessage[] = [];
  readonly subscribed: string[] = [];
  readonly unsubscribed: string[] = [];

  broadcast(msg: StreamMessage): void {
    this.messages.push(msg);
  }
  broadcastCommand(cmd: RemoteCommandMessage): void {
    this.commands.push(cmd);
  }
  subscribe(stream: string): void {
    this.subscribed.push(stream);
  }
  unsubscribe(stream: string): void {
    this.unsubscribed.push(stream);
  }
}
