import {
  ApiGatewayManagementApiClient,
  type ApiGatewayManagementApiClientConfig,
  DeleteConnectionCommand,
  PostToConnectionCommand,
} from '@aws-sdk/client-apigatewaymanagementapi';
import { AwsResourceError, ThrottledError } from '../../../kernel/errors.js';
import type { ConnectionApi } from '../../../realtime/ports.js';

/** Options of {@link ApiGatewayConnectionApi}. */
export interface ApiGatewayConnectionApiOptions {
  /**
   * The management endpoint when a call names none (`https://<domain>/<stage>`, or
   * `http://127.0.0.1:3001` offline). Handlers pass the endpoint of their request instead.
   */
  readonly endpoint?: string;
  /** Client settings (region, credentials) for every endpoint's client. */
  readonly clientConfig?: Omit<ApiGatewayManagementApiClientConfig, 'endpoint'>;
  /**
   * Makes the client of an endpoint (to add middleware, say); `clientConfig` is then unused.
   * @default a new `ApiGatewayManagementApiClient` with `clientConfig`, `maxAttempts: 1` (this
   * adapter retries throttles and 5xx itself) and `cacheMiddleware: true` (a fan-out makes one call per subscriber; the chain is then resolved
   * once per client, not per call)
   */
  readonly createClient?: (endpoint: string) => ApiGatewayManagementApiClient;
  /**
   * Attempts of a call that was throttled (`LimitExceededException`, HTTP 429), met a 5xx, or
   * met a transient network error (as the SDK's retries classify it: a reset or timed-out
   * socket, such as a keep-alive socket the endpoint closed while idle); a call still throttled after
   * the last throws {@link ThrottledError}.
   * @default 5
   */
  readonly maxAttempts?: number;
  /**
   * First back-off after throttling, in ms; doubled per attempt, with jitter.
   * @default 50
   */
  readonly backoffMs?: number;
}

/**
 * {@link ConnectionApi} over the API Gateway management API (PostToConnection,
 * DeleteConnection). A 410 means the connection is gone (offline the SDK may name that
 * error `Unknown`, so the status code decides); throttling backs off and retries.
 */
export class ApiGatewayConnectionApi implements ConnectionApi {
  private readonly clients = new Map<string, ApiGatewayManagementApiClient>();

  constructor(private readonly options: ApiGatewayConnectionApiOptions = {}) {}

  async post(connectionId: string, frame: string, endpoint?: string): Promise<'sent' | 'gone'> {
    const client = this.client(endpoint);
    const data = new TextEncoder().encode(frame);
    return this.withRetry('PostToConnection', connectionId, endpoint, async () => {
      await client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: data }));
    });
  }

  async close(connectionId: string, endpoint?: string): Promise<void> {
    const client = this.client(endpoint);
    await this.withRetry('DeleteConnection', connectionId, endpoint, async () => {
      await client.send(new DeleteConnectionCommand({ ConnectionId: connectionId }));
    });
  }

  /** Releases the HTTP clients. */
  destroy(): void {
    for (const client of this.clients.values()) client.destroy();
    this.clients.clear();
  }

  private client(endpoint: string | undefined): ApiGatewayManagementApiClient {
    const url = endpoint || this.options.endpoint;
    if (!url) {
      throw new AwsResourceError('no management API endpoint: pass one per call or in options', {
        resource: 'execute-api',
      });
    }
    let client = this.clients.get(url);
    if (!client) {
      client =
        this.options.createClient?.(url) ??
        new ApiGatewayManagementApiClient({
          cacheMiddleware: true,
          maxAttempts: 1,
          ...this.options.clientConfig,
          endpoint: url,
        });
      this.clients.set(url, client);
    }
    return client;
  }

  private async withRetry(
    operation: string,
    connectionId: string,
    endpoint: string | undefined,
    call: () => Promise<void>,
  ): Promise<'sent' | 'gone'> {
    const attempts = this.options.maxAttempts ?? 5;
    const backoff = this.options.backoffMs ?? 50;
    for (let attempt = 1; ; attempt++) {
      try {
        await call();
        return 'sent';
      } catch (error) {
        const status = statusOf(error);
        if (status === 410 || nameOf(error) === 'GoneException') return 'gone';
        const throttled = status === 429 || nameOf(error) === 'LimitExceededException';
        // A 5xx is retried like a throttle: the SDK client's own retries are best left off
        // (functions/runtime.ts), so that the two do not multiply. So is a transient network
        // error, which the SDK's retries would have taken: a keep-alive socket that the endpoint
        // closed after idling is reset on reuse (ECONNRESET, named TimeoutError), and with no
        // retry the frame (an `info` reply the client waits for) would be lost. The request may
        // have reached the endpoint: a frame can then arrive twice, never not at all.
        const serverError = status !== undefined && status >= 500;
        const transient = isTransientNetworkError(error);
        if ((throttled || serverError || transient) && attempt < attempts) {
          const delay = backoff * 2 ** (attempt - 1);
          await new Promise((r) => setTimeout(r, delay / 2 + Math.random() * (delay / 2)));
          continue;
        }
        const resource = endpoint || this.options.endpoint || 'execute-api';
        const code = (error as { code?: unknown })?.code;
        const cause = typeof code === 'string' ? `${nameOf(error)} ${code}` : nameOf(error);
        const message = `${operation} on ${resource} failed for ${connectionId}: ${cause} (HTTP ${status ?? '?'})`;
        const fields = { resource, ids: [connectionId], cause: error };
        throw throttled
          ? new ThrottledError(message, fields)
          : new AwsResourceError(message, fields);
      }
    }
  }
}

/**
 * A network error the SDK's retries take as transient, by the names and codes its own
 * classification uses (`isTransientError` of `@smithy/core/retry`, not imported: it is not
 * in the runtime's SDK that the bundles leave out, and would add 13 KiB to each): its HTTP
 * handler names a reset, broken or timed-out socket (`ECONNRESET`, `EPIPE`, `ETIMEDOUT`) and
 * a connection or socket timeout `TimeoutError`; no response came, so no status either.
 */
function isTransientNetworkError(error: unknown): boolean {
  if (!(error instanceof Error) || statusOf(error) !== undefined) return false;
  const code = (error as { code?: unknown }).code;
  return (
    TRANSIENT_NAMES.includes(error.name) ||
    (typeof code === 'string' && TRANSIENT_CODES.includes(code))
  );
}
const TRANSIENT_NAMES = ['TimeoutError', 'RequestTimeout', 'RequestTimeoutException'];
const TRANSIENT_CODES = [
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
];

function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function nameOf(error: unknown): string {
  return error instanceof Error ? error.name : String(error);
}
