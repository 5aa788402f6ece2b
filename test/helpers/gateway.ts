import {
  type Broker,
  type ComposeDeliveryOptions,
  type ConnectionApi,
  type ConnectionStore,
  composeRealtime,
  createConnectToken,
  defaultGatewayConfig,
  type GatewayConfig,
  LegacyBroker,
  type Logger,
  type Pinger,
  type PresenceChange,
  presenceEventOf,
  presenceMessage,
  type RateLimit,
  signStreamName,
} from '../../lib/core';
import {
  MemoryBroker,
  MemoryConnectionApi,
  MemoryConnectionStore,
  MemoryPresenceStore,
  MemoryRateLimiter,
  MemorySessionCache,
} from '../../lib/testing';
import { FakeClock } from './clock';

/** The extended protocol's subprotocol. */
export const EXT = 'actioncable-v1-ext-json';
export const JWT_SECRET = 'jwt-secret';
export const STREAMS_SECRET = 'streams-secret';

/** A public-stream identifier. */
export const pubsub = (stream: string) =>
  JSON.stringify({ channel: '$pubsub', stream_name: stream });

/** A signed-stream identifier. */
export const signedId = (stream: string, secret = STREAMS_SECRET) =>
  JSON.stringify({ channel: '$pubsub', signed_stream_name: signStreamName(stream, secret) });

/** One logged line. */
export interface LogEntry {
  readonly level: string;
  readonly message: string;
  readonly fields: Record<string, unknown> | undefined;
}

/** A logger that keeps every line, for assertions on what is logged at which level. */
export class RecordingLogger implements Logger {
  readonly entries: LogEntry[] = [];
  debug(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'debug', message, fields });
  }
  info(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'info', message, fields });
  }
  warn(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'warn', message, fields });
  }
  error(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'error', message, fields });
  }
  at(level: string): LogEntry[] {
    return this.entries.filter((e) => e.level === level);
  }
  warnings(): string[] {
    return this.at('warn').map((e) => e.message);
  }
  /** Everything logged at INFO and above, as text. */
  visible(): string {
    return JSON.stringify(this.entries.filter((e) => e.level !== 'debug'));
  }
}

/** What a {@link gatewayHarness} is built with; every option has the default most tests want. */
export interface GatewayHarnessOptions<S extends ConnectionStore, A extends ConnectionApi> {
  /** Over {@link harnessConfig}: the test secrets, public stream prefix `''`. */
  readonly config?: Partial<GatewayConfig>;
  /** The clock everything reads. @default a new {@link FakeClock} */
  readonly clock?: FakeClock;
  /** The connection store, given the clock. @default a `MemoryConnectionStore` without clock */
  readonly store?: (clock: FakeClock) => S;
  /** The management API. @default a `MemoryConnectionApi` (frames are read from it) */
  readonly api?: A;
  /** The broker behind the fan-out. @default `'memory'` (a `MemoryBroker` on the clock) */
  readonly broker?: 'memory' | 'legacy';
  /** A `MemoryRateLimiter` of this limit for the gateway. @default no limit */
  readonly rateLimit?: RateLimit;
  /** Presence over a `MemoryPresenceStore` whose changes reach the broker. @default off */
  readonly presence?: { readonly ttlMs: number };
  /** Session ids are `<sidPrefix>1`, `<sidPrefix>2`, … @default `'sid-'` */
  readonly sidPrefix?: string;
  /** Hand the composition no logger (the no-op one): for runs of many thousand frames. */
  readonly quiet?: boolean;
  /** The rest of the composition: retry passes, fan-out tasks… @default the library's */
  readonly delivery?: Omit<
    ComposeDeliveryOptions,
    'store' | 'api' | 'sessions' | 'clock' | 'logger' | 'presence'
  >;
}

/** How a harness connects: who, with what query, subprotocols and endpoint. */
export interface HarnessConnect {
  /** The token's subject; `null` connects without a token. @default `'alice'` */
  readonly sub?: string | null;
  /** The token's lifetime. @default 600 */
  readonly ttlSeconds?: number;
  /** More query parameters (`sid`, `pi`…). */
  readonly query?: Record<string, string>;
  /** @default {@link EXT} */
  readonly protocols?: string;
  /** `null`: none, as the pinger's tests connect. @default `'https://api.example/dev'` */
  readonly endpoint?: string | null;
}

/** The gateway config of the harness before its overrides. */
export function harnessConfig(overrides: Partial<GatewayConfig> = {}): GatewayConfig {
  return {
    ...defaultGatewayConfig(),
    jwtSecret: JWT_SECRET,
    streamsSecret: STREAMS_SECRET,
    // Any public name, as AnyCable; the public prefix has tests of its own.
    publicStreamPrefix: '',
    ...overrides,
  };
}

/**
 * The WebSocket side composed over memory adapters on a fake clock, as the Lambdas compose it
 * over DynamoDB and API Gateway, with the calls a test makes as a client and as the broadcast
 * consumer. Every gateway, pinger and fan-out test and the keepalive bench build on it.
 */
export function gatewayHarness<
  S extends ConnectionStore = MemoryConnectionStore,
  A extends ConnectionApi = MemoryConnectionApi,
>(options: GatewayHarnessOptions<S, A> = {}) {
  const clock = options.clock ?? new FakeClock();
  const store = options.store?.(clock) ?? (new MemoryConnectionStore() as ConnectionStore as S);
  const api = options.api ?? (new MemoryConnectionApi() as ConnectionApi as A);
  const logger = new RecordingLogger();
  const sessions = new MemorySessionCache({ clock });
  const config = harnessConfig(options.config);
  const changes: PresenceChange[] = [];
  /** Presence changes on their way to the subscribers (the outbox and broadcast consumer). */
  const delivered: Promise<void>[] = [];
  let broker: Broker | undefined;
  const presenceStore = new MemoryPresenceStore({
    onChange: (list) => {
      changes.push(...list);
      for (const change of list) {
        const msg = presenceMessage(presenceEventOf(change));
        if (msg && broker) delivered.push(broker.handleBroadcast(msg));
      }
    },
  });
  let sids = 0;
  const sidPrefix = options.sidPrefix ?? 'sid-';
  const realtime = composeRealtime(
    {
      ...options.delivery,
      store,
      api,
      sessions,
      config,
      clock,
      ...(options.quiet ? {} : { logger }),
      newSid: () => `${sidPrefix}${++sids}`,
      ...(options.rateLimit ? { rateLimiter: new MemoryRateLimiter(options.rateLimit) } : {}),
      ...(options.presence
        ? { presence: { store: presenceStore, ttlMs: options.presence.ttlMs } }
        : {}),
    },
    (broadcaster, cache): Broker =>
      options.broker === 'legacy'
        ? new LegacyBroker({ broadcaster })
        : new MemoryBroker({ broadcaster, sessions: cache, clock }),
  );
  broker = realtime.broker;
  const { gateway } = realtime;

  const token = (sub = 'alice', ttlSeconds = 600) =>
    createConnectToken({ sub, ttlSeconds }, JWT_SECRET, clock);
  /** `$connect` alone: the pinger, or a later `welcome`, delivers the welcome. */
  async function connect(connectionId: string, how: HarnessConnect = {}) {
    const jid = how.sub === null ? undefined : await token(how.sub ?? 'alice', how.ttlSeconds);
    const endpoint = how.endpoint === undefined ? 'https://api.example/dev' : how.endpoint;
    return gateway.connect({
      connectionId,
      ...(endpoint === null ? {} : { endpoint }),
      query: { ...(jid ? { jid } : {}), ...how.query },
      protocols: how.protocols ?? EXT,
    });
  }
  /** `$connect` then welcome, as the Lambdas do. */
  async function open(connectionId: string, how: HarnessConnect = {}) {
    const result = await connect(connectionId, how);
    await gateway.welcome(connectionId);
    return result;
  }
  /** A frame from the client; resolves once the presence changes it made are delivered. */
  function send(connectionId: string, frame: object | string) {
    const received = gateway.receive(
      connectionId,
      typeof frame === 'string' ? frame : JSON.stringify(frame),
    );
    if (!options.presence) return received;
    return received.then(async (result) => {
      await Promise.all(delivered.splice(0));
      return result;
    });
  }
  const subscribe = (connectionId: string, identifier: string, history?: object) =>
    send(connectionId, { command: 'subscribe', identifier, ...(history ? { history } : {}) });
  const whisper = (connectionId: string, identifier: string, data: object = { typing: true }) =>
    send(connectionId, { command: 'whisper', identifier, data });
  /** A broadcast, as the broadcast consumer hands it over. */
  const publish = (stream: string, data: unknown) =>
    realtime.broker.handleBroadcast({
      stream,
      data: typeof data === 'string' ? data : JSON.stringify(data),
    });
  /** Every frame posted to `connectionId`, parsed. */
  function frames(connectionId: string): Record<string, unknown>[] {
    if (!(api instanceof MemoryConnectionApi)) throw new Error('frames: the api is not memory');
    return api.framesOf(connectionId) as Record<string, unknown>[];
  }
  /** The broadcast messages `connectionId` got. */
  const messagesOf = (connectionId: string) =>
    frames(connectionId)
      .filter((f) => 'message' in f && f.type === undefined)
      .map((f) => f.message);
  /** Ticks `pinger` for `ms` of fake time, as the pinger function does, `each` before a tick. */
  async function tick(
    pinger: Pinger,
    ms: number,
    { tickMs = 250, each }: { tickMs?: number; each?: (t: number) => Promise<void> } = {},
  ) {
    for (let t = 0; t < ms; t += tickMs) {
      if (each) await each(t);
      await pinger.tick();
      clock.advance(tickMs);
    }
  }
  return {
    clock,
    config,
    store,
    api,
    logger,
    sessions,
    realtime,
    broker: realtime.broker,
    fanout: realtime.fanout,
    revocations: realtime.revocations,
    gateway,
    pinger: realtime.pinger,
    presenceStore,
    changes,
    delivered,
    token,
    connect,
    open,
    send,
    subscribe,
    whisper,
    publish,
    frames,
    messagesOf,
    tick,
  };
}

/** What {@link gatewayHarness} returns. */
export type GatewayHarness = ReturnType<typeof gatewayHarness>;
