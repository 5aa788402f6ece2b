import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Options of {@link ManagementStandIn}. */
export interface ManagementStandInOptions {
  /** Posts accepted per second (a token bucket); the rest answer 429. @default unlimited */
  readonly ratePerSecond?: number;
  /** The bucket's size: posts accepted at once before the rate applies. @default ratePerSecond / 10 */
  readonly burst?: number;
  /** Connections that answer 410 (gone). */
  readonly gone?: ReadonlySet<string>;
}

/** What one connection received: each frame's offset, in arrival order. */
export type Received = Map<string, number[]>;

/**
 * A stand-in for API Gateway's management API (`@connections`), on 127.0.0.1, for
 * connections that have no socket: it answers `PostToConnection` with 200, 410 for a gone
 * connection, and 429 `LimitExceededException` when its token bucket is empty, as API Gateway
 * throttles over the account's rate. It keeps the offset of each frame a connection got.
 */
export class ManagementStandIn {
  readonly received: Received = new Map();
  posts = 0;
  throttled = 0;
  goneAnswers = 0;
  /** When the last frame was accepted (ms, `performance.now()`). */
  lastAcceptedAt = 0;
  private server: Server | undefined;
  private tokens: number;
  private refilledAt = performance.now();

  constructor(private readonly options: ManagementStandInOptions = {}) {
    this.tokens = this.burst();
  }

  /** Starts listening; resolves to the endpoint to post to. */
  async start(): Promise<string> {
    this.server = createServer((req, res) => this.handle(req, res));
    // Many functions post at once: no connection is refused for a full backlog.
    this.server.maxConnections = 10_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
  }

  /** Forgets what was received (not the bucket). */
  reset(): void {
    this.received.clear();
    this.posts = 0;
    this.throttled = 0;
    this.goneAnswers = 0;
  }

  private burst(): number {
    const rate = this.options.ratePerSecond;
    return rate === undefined
      ? Number.POSITIVE_INFINITY
      : (this.options.burst ?? Math.max(1, rate / 10));
  }

  private take(): boolean {
    const rate = this.options.ratePerSecond;
    if (rate === undefined) return true;
    const now = performance.now();
    this.tokens = Math.min(this.burst(), this.tokens + ((now - this.refilledAt) / 1000) * rate);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const match = /\/@connections\/([^/?]+)/.exec(req.url ?? '');
      if (!match) {
        res.writeHead(404).end();
        return;
      }
      const connectionId = decodeURIComponent(match[1]!);
      if (req.method === 'DELETE') {
        res.writeHead(204).end();
        return;
      }
      this.posts++;
      if (this.options.gone?.has(connectionId)) {
        this.goneAnswers++;
        this.error(res, 410, 'GoneException', 'connection is gone');
        return;
      }
      if (!this.take()) {
        this.throttled++;
        this.error(res, 429, 'LimitExceededException', 'Rate exceeded');
        return;
      }
      const frame = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { offset?: number };
      const list = this.received.get(connectionId) ?? [];
      list.push(frame.offset ?? -1);
      this.received.set(connectionId, list);
      this.lastAcceptedAt = performance.now();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  }

  private error(res: ServerResponse, status: number, type: string, message: string): void {
    res
      .writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': type })
      .end(JSON.stringify({ message }));
  }
}

/** Connections whose frames were not exactly `expected` (each once, in order): their ids. */
export function wrongDeliveries(
  received: Received,
  connections: readonly string[],
  expected: readonly number[],
): { missing: number; duplicated: number; outOfOrder: number } {
  let missing = 0;
  let duplicated = 0;
  let outOfOrder = 0;
  for (const id of connections) {
    const got = received.get(id) ?? [];
    if (new Set(got).size !== got.length) duplicated++;
    if (expected.some((o) => !got.includes(o))) missing++;
    const seen = got.filter((o) => expected.includes(o));
    if (seen.some((o, i) => i > 0 && o < seen[i - 1]!)) outOfOrder++;
  }
  return { missing, duplicated, outOfOrder };
}
