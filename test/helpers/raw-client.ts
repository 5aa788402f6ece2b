import WebSocket from 'ws';
import { until } from './cable';

export const EXT = 'actioncable-v1-ext-json';

/** A frame the server sent, parsed. */
export type Frame = Record<string, unknown>;

/** A raw WebSocket client of the extended protocol: every frame it gets, in order (pings left out). */
export class RawClient {
  readonly frames: Frame[] = [];
  closed = false;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      if (frame.type !== 'ping') this.frames.push(frame);
    });
    ws.on('close', () => {
      this.closed = true;
    });
  }

  /**
   * Opens a connection to `wsUrl` with `query`, as this class (or a subclass); resolves once
   * the upgrade is done.
   */
  static async connect<T extends RawClient>(
    this: new (
      ws: WebSocket,
    ) => T,
    wsUrl: string,
    query: Record<string, string>,
  ): Promise<T> {
    const ws = new WebSocket(`${wsUrl}?${new URLSearchParams(query)}`, [EXT]);
    const client = new this(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return client;
  }

  send(frame: object | string): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The first frame after `from` that matches. */
  next(match: (f: Frame) => boolean, what: string, from = 0, timeoutMs = 20_000): Promise<Frame> {
    return until(() => this.frames.slice(from).find(match), timeoutMs, what);
  }

  /** Subscribes and returns the answer to it. */
  async subscribe(identifier: string, extra: object = {}): Promise<Frame> {
    const from = this.frames.length;
    this.send({ command: 'subscribe', identifier, ...extra });
    return this.next(
      (f) =>
        f.identifier === identifier &&
        (f.type === 'confirm_subscription' || f.type === 'reject_subscription'),
      `an answer to subscribe ${identifier.slice(0, 80)}`,
      from,
    );
  }

  /** Closes the connection and waits until it is closed. */
  async close(): Promise<void> {
    this.ws.close();
    await until(() => this.closed, 10_000, 'the close');
  }
}
