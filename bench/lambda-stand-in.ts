import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/** Options of {@link LambdaStandIn}. */
export interface LambdaStandInOptions {
  /** Functions (deployed names) whose Invokes are limited; others pass through. */
  readonly functions: readonly string[];
  /** Invocations of those functions running at once, past which Invoke answers 429. */
  readonly concurrencyLimit: number;
}

/**
 * A stand-in for the Lambda API in front of serverless-offline's, on 127.0.0.1: it passes
 * every request through, except that an `Invoke` of a limited function while
 * `concurrencyLimit` of them run answers as Lambda does when the account's (or a function's
 * reserved) concurrency is spent: 429 `TooManyRequestsException`, the invocation not started.
 * serverless-offline itself runs every Invoke at once, however many.
 */
export class LambdaStandIn {
  invokes = 0;
  throttled = 0;
  running = 0;
  maxRunning = 0;
  private server: Server | undefined;
  private upstream: Promise<URL>;
  private setUpstream: (url: URL) => void = () => {};

  constructor(private readonly options: LambdaStandInOptions) {
    this.upstream = new Promise((resolve) => {
      this.setUpstream = resolve;
    });
  }

  /** Starts listening; resolves to the endpoint the functions invoke. */
  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.maxConnections = 10_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Where requests go (serverless-offline's Lambda port); they wait until it is known. */
  forwardTo(endpoint: string): void {
    this.setUpstream(new URL(endpoint));
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const fn = /\/functions\/([^/]+)\/invocations/.exec(req.url ?? '')?.[1];
    const limited = fn !== undefined && this.options.functions.includes(decodeURIComponent(fn));
    if (limited) {
      this.invokes++;
      if (this.running >= this.options.concurrencyLimit) {
        this.throttled++;
        req.resume();
        res.writeHead(429, {
          'content-type': 'application/json',
          'x-amzn-errortype': 'TooManyRequestsException',
        });
        res.end(
          JSON.stringify({
            Type: 'User',
            message: 'Rate Exceeded.',
            Reason: 'ReservedFunctionConcurrentInvocationLimitExceeded',
          }),
        );
        return;
      }
      this.running++;
      this.maxRunning = Math.max(this.maxRunning, this.running);
    }
    const upstream = await this.upstream;
    const done = () => {
      if (limited) this.running--;
    };
    const out = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('end', done);
      },
    );
    out.on('error', (error) => {
      done();
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
    req.pipe(out);
  }
}
