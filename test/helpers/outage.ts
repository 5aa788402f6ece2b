import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The page a load balancer answers with when its targets are down. */
export const OUTAGE_PAGE =
  '<html><head><title>503 Service Temporarily Unavailable</title></head>' +
  '<body><center><h1>503 Service Temporarily Unavailable</h1></center></body></html>';

/** A load balancer on 127.0.0.1 (see {@link loadBalancer}). */
export interface LoadBalancer {
  /** The endpoint to give an SDK client. */
  readonly endpoint: string;
  /** While true, every request gets `status` with {@link OUTAGE_PAGE}. */
  down: boolean;
  /** The status of an outage's answer. @default 503 */
  status: number;
  /** Requests answered with the outage page. */
  readonly refused: number;
  close(): Promise<void>;
}

/**
 * A load balancer in front of `target` (an emulator's endpoint), on 127.0.0.1 only: while
 * `down` (or when there is no target) it answers every request with an HTML error page, as an
 * AWS front end does when its targets are unhealthy and no emulator ever does; otherwise it
 * forwards the request as it is. The SDK cannot parse such a body and throws `SyntaxError`.
 */
export async function loadBalancer(target?: string): Promise<LoadBalancer> {
  let refused = 0;
  const server = createServer((req, res) => {
    if (balancer.down || target === undefined) {
      refused++;
      req.resume();
      req.on('end', () => {
        res.writeHead(balancer.status, { 'content-type': 'text/html' });
        res.end(OUTAGE_PAGE);
      });
      return;
    }
    const upstream = request(
      new URL(req.url ?? '/', target),
      { method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const balancer: LoadBalancer = {
    endpoint: `http://127.0.0.1:${port}`,
    down: true,
    status: 503,
    get refused() {
      return refused;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
  return balancer;
}
