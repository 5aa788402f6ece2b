import WebSocket from 'ws';
import { errorMessage } from '../lib/core';

/** The subprotocol the bench clients speak (AnyCable's extended Action Cable protocol). */
export const EXT_PROTOCOL = 'actioncable-v1-ext-json';

/** A broadcast frame as a client receives it. */
export interface ReceivedBroadcast {
  readonly identifier: string;
  readonly message: unknown;
  /** `performance.now()` when the frame arrived. */
  readonly at: number;
}

/** The `$pubsub` identifier of a signed stream, as `@anycable/core` writes it (keys sorted). */
export function signedIdentifier(signed: string): string {
  return JSON.stringify({ channel: '$pubsub', signed_stream_name: signed });
}

/**
 * A bare `ws` client speaking `actioncable-v1-ext-json`: no monitor, no reconnect, no
 * subscribe retry (the stock client re-sends subscribe after 5 s without a confirm), so a
 * slow server is measured, not a client's recovery from it.
 */
export class BenchClient {
  /** Called for every broadcast frame (one with an identifier and a message, no type). */
  onBroadcast: ((b: ReceivedBroadcast) => void) | undefined;
  private readonly waiting = new Map<string, { resolve(): void; reject(e: Error): void }>();
  private readonly watchers = new Set<(frame: Record<string, unknown>, at: number) => void>();

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.frame(data.toString()));
    ws.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error('closed before the confirm'));
      this.waiting.clear();
    });
  }

  /**
   * Opens a connection (`jid` = the connect token, when given, and any other `query`
   * parameters, e.g. `pi`) and waits for `welcome`.
   */
  static connect(
    url: string,
    token: string | undefined,
    timeoutMs: number,
    query: Readonly<Record<string, string>> = {},
  ): Promise<BenchClient> {
    const params = new URLSearchParams({ ...(token ? { jid: token } : {}), ...query }).toString();
    const target = params ? `${url}?${params}` : url;
    const ws = new WebSocket(target, EXT_PROTOCOL);
    const client = new BenchClient(ws);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        ws.terminate();
        reject(new Error('no welcome in time'));
      }, timeoutMs);
      const onFrame = (data: WebSocket.RawData) => {
        const frame = parse(data.toString());
        if (frame?.type === 'welcome') {
          clearTimeout(timer);
          ws.off('message', onFrame);
          resolve(client);
        } else if (frame?.type === 'disconnect') {
          clearTimeout(timer);
          reject(new Error(`disconnected: ${String(frame.reason)}`));
        }
      };
      ws.on('message', onFrame);
      ws.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      ws.once('close', (code) => {
        clearTimeout(timer);
        reject(new Error(`closed before the welcome (${code})`));
      });
    });
  }

  /** Subscribes to a signed stream once and waits for `confirm_subscription`. */
  subscribe(identifier: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(identifier);
        reject(new Error('no confirm in time'));
      }, timeoutMs);
      this.waiting.set(identifier, {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.ws.send(JSON.stringify({ command: 'subscribe', identifier }));
    });
  }

  /**
   * Resolves with the `performance.now()` at which the first frame that `match`es arrives
   * (after this call); rejects after `timeoutMs`, naming `what`.
   */
  waitFor(
    match: (frame: Record<string, unknown>) => boolean,
    what = 'a frame',
    timeoutMs = 30_000,
  ): Promise<number> {
    return new Promise((resolve, reject) => {
      const watcher = (frame: Record<string, unknown>, at: number) => {
        if (!match(frame)) return;
        clearTimeout(timer);
        this.watchers.delete(watcher);
        resolve(at);
      };
      const timer = setTimeout(() => {
        this.watchers.delete(watcher);
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.watchers.add(watcher);
    });
  }

  close(): void {
    this.ws.terminate();
  }

  private frame(text: string): void {
    const at = performance.now();
    const frame = parse(text);
    if (!frame) return;
    for (const watcher of [...this.watchers]) watcher(frame, at);
    const identifier = typeof frame.identifier === 'string' ? frame.identifier : undefined;
    if (frame.type === 'confirm_subscription' || frame.type === 'reject_subscription') {
      const w = identifier === undefined ? undefined : this.waiting.get(identifier);
      if (!w || identifier === undefined) return;
      this.waiting.delete(identifier);
      if (frame.type === 'confirm_subscription') w.resolve();
      else w.reject(new Error('subscription rejected'));
      return;
    }
    if (frame.type === undefined && identifier !== undefined && 'message' in frame) {
      this.onBroadcast?.({ identifier, message: frame.message, at });
    }
  }
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Runs `fn` for each item with at most `limit` in flight; collects every outcome. */
export async function inWaves<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<PromiseSettledResult<R>[]> {
  const out: PromiseSettledResult<R>[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        out[i] = { status: 'fulfilled', value: await fn(items[i]!, i) };
      } catch (reason) {
        out[i] = { status: 'rejected', reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** The `q` quantile (0..1) of `values`, nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Counts rejections by reason, e.g. `3× "no confirm in time"`. */
export function failures(outcomes: readonly PromiseSettledResult<unknown>[]): string {
  const byReason = new Map<string, number>();
  for (const o of outcomes) {
    if (o.status !== 'rejected') continue;
    const reason = errorMessage(o.reason);
    byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
  }
  return [...byReason].map(([reason, n]) => `${n}× "${reason}"`).join(', ');
}
