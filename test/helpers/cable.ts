import { type Cable, createCable } from '@anycable/core';
import WebSocket from 'ws';

/** Polls `probe` every 50 ms until it gives something other than `undefined` or `false`. */
export async function until<T>(
  probe: () => T | undefined,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What a channel has received so far. */
export interface Received {
  readonly messages: unknown[];
}

/** Records every message `channel` gets. */
export function collect(channel: ReturnType<Cable['streamFromSigned']>): Received {
  const received: Received = { messages: [] };
  channel.on('message', (msg: unknown) => {
    received.messages.push(msg);
  });
  return received;
}

/**
 * Stock `@anycable/core` clients on `wsUrl`, connected as a browser connects them (extended
 * protocol, `jid` token); `disconnectAll()` closes every one it made.
 */
export function anycableClients(wsUrl: string): {
  cable(token: string | undefined, options?: Record<string, unknown>): Cable;
  disconnectAll(): void;
} {
  const cables: Cable[] = [];
  return {
    cable(token, options = {}) {
      const c = createCable(wsUrl, {
        websocketImplementation: WebSocket,
        protocol: 'actioncable-v1-ext-json',
        logLevel: 'error',
        // On a slow machine a late ping must not turn into a reconnect the test did not ask for.
        monitor: false,
        ...(token ? { auth: { token } } : {}),
        ...options,
      });
      cables.push(c);
      return c;
    },
    disconnectAll() {
      for (const c of cables.splice(0)) c.disconnect();
    },
  };
}
