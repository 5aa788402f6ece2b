import { randomUUID } from 'node:crypto';
import type { Broker, Cacheable, SessionUpdate, StreamMessage } from '../broker/types.js';
import { type Clock, systemClock } from '../kernel/clock.js';
import { errorMessage, HistoryError, ProtocolError, UnauthorizedError } from '../kernel/errors.js';
import {
  fingerprint,
  MAX_IDENTIFIER_BYTES,
  MAX_SID_BYTES,
  MAX_STREAM_BYTES,
  utf8Bytes,
} from '../kernel/limits.js';
import { type Logger, noopLogger } from '../kernel/logger.js';
import type { GatewayConfig } from './config.js';
import type { ConnectionApi } from './connection-api.js';
import type { ConnectionRecord, ConnectionStore, Subscription } from './connections.js';
import {
  broadcastFrame,
  disconnectConnection,
  disconnectGone,
  GatewayBroadcaster,
  type GonePolicy,
} from './fanout.js';
import { parsePingInterval } from './pinger.js';
import { verifyConnectToken, verifySignedStreamName } from './tokens.js';

/** AnyCable's extended protocol: history and session restore. */
export const EXT_PROTOCOL = 'actioncable-v1-ext-json';
/** Plain Action Cable JSON protocol. */
export const PLAIN_PROTOCOL = 'actioncable-v1-json';
/** The pub/sub channel of signed and public streams. */
export const PUBSUB_CHANNEL = '$pubsub';

/** Options of {@link Gateway}. */
export interface GatewayOptions {
  readonly store: ConnectionStore;
  readonly broker: Broker;
  readonly api: ConnectionApi;
  readonly config: GatewayConfig;
  /** @default the system clock */
  readonly clock?: Clock;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
  /** @default `crypto.randomUUID` */
  readonly newSid?: () => string;
  /**
   * Posts in flight at once during pings and whispers.
   * @default 50
   */
  readonly concurrency?: number;
  /**
   * A connection younger than this (ms) is not disconnected on a 410 (it may still be in
   * `$connect`); see {@link disconnectGone}.
   * @default 10000
   */
  readonly goneGraceMs?: number;
}

/** The `$connect` request. */
export interface ConnectRequest {
  readonly connectionId: string;
  /** The management API endpoint of this connection. */
  readonly endpoint?: string;
  /** The query string parameters (`jid`, `sid`, `pi`). */
  readonly query: Readonly<Record<string, string | undefined>>;
  /** The `Sec-WebSocket-Protocol` header value (comma-separated). */
  readonly protocols?: string;
}

/** The `$connect` answer. */
export interface ConnectResult {
  /** 200 to accept the upgrade (also for refused credentials: they are refused after it). */
  readonly statusCode: number;
  /** The subprotocol to echo in `Sec-WebSocket-Protocol`. */
  readonly protocol?: string;
}

/** A subscription as kept in the session cache. */
export interface SessionSubscription {
  readonly identifier: string;
  readonly stream: string;
  readonly whisper: boolean;
}

/** What the session cache holds per sid. */
export interface SessionState {
  readonly identity: string;
  readonly protocol: string;
  readonly subscriptions: readonly SessionSubscription[];
  /** Whether `welcome` was delivered. */
  readonly welcomed?: boolean;
  /** Identifiers restored from the previous session, announced by the pending `welcome`. */
  readonly restoredIds?: readonly string[];
}

/** A {@link SessionState} as a {@link Cacheable} (JSON). */
export class Session implements Cacheable {
  constructor(readonly state: SessionState) {}

  toCacheEntry(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify(this.state));
  }

  /** Reads a cache entry; `undefined` when it is not a session. */
  static decode(bytes: Uint8Array | null): SessionState | undefined {
    if (!bytes) return undefined;
    try {
      const s = JSON.parse(new TextDecoder().decode(bytes)) as Partial<SessionState>;
      if (typeof s.identity !== 'string' || !Array.isArray(s.subscriptions)) return undefined;
      const subscriptions = s.subscriptions.filter(
        (x): x is SessionSubscription =>
          typeof x?.identifier === 'string' && typeof x?.stream === 'string',
      );
      return { ...s, identity: s.identity, protocol: String(s.protocol ?? ''), subscriptions };
    } catch {
      return undefined;
    }
  }
}

interface ClientFrame {
  command?: unknown;
  identifier?: unknown;
  data?: unknown;
  history?: unknown;
}

interface HistoryRequest {
  since?: unknown;
  streams?: unknown;
}

/**
 * The AnyCable-compatible WebSocket gateway, one method per Lambda invocation
 * (`$connect`, welcome, `$default`, `$disconnect`, pinger). It keeps no state in memory:
 * connections and subscriptions live in the {@link ConnectionStore}, sessions in the
 * {@link Broker}'s session cache.
 */
export class Gateway {
  private readonly store: ConnectionStore;
  private readonly broker: Broker;
  private readonly api: ConnectionApi;
  private readonly config: GatewayConfig;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly newSid: () => string;
  private readonly concurrency: number;
  private readonly gone: GonePolicy;
  private readonly fanOut: GatewayBroadcaster;

  constructor(options: GatewayOptions) {
    this.store = options.store;
    this.broker = options.broker;
    this.api = options.api;
    this.config = options.config;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? noopLogger;
    this.newSid = options.newSid ?? randomUUID;
    this.concurrency = options.concurrency ?? 50;
    this.gone = {
      store: this.store,
      sessions: this.broker,
      clock: this.clock,
      goneGraceMs: options.goneGraceMs ?? 10_000,
    };
    this.fanOut = new GatewayBroadcaster({
      store: this.store,
      api: this.api,
      sessions: this.broker,
      logger: this.logger,
      concurrency: this.concurrency,
      clock: this.clock,
      goneGraceMs: this.gone.goneGraceMs,
    });
  }

  /**
   * `$connect`: negotiates the subprotocol (400 when neither Action Cable protocol is
   * offered), identifies the client and stores the connection with a new session. Bad
   * credentials still answer 200: the connection is stored refused, and {@link welcome}
   * sends `disconnect unauthorized` and closes it. With the extended protocol and a
   * non-empty `sid`, the previous session's subscriptions are restored.
   */
  async connect(request: ConnectRequest): Promise<ConnectResult> {
    const { connectionId, endpoint, query } = request;
    const offered = (request.protocols ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);
    const protocol = offered.includes(EXT_PROTOCOL)
      ? EXT_PROTOCOL
      : offered.includes(PLAIN_PROTOCOL)
        ? PLAIN_PROTOCOL
        : undefined;
    if (!protocol) {
      this.logger.warn('connection refused: no supported subprotocol', {
        connectionId,
        offered: request.protocols ?? '',
      });
      return { statusCode: 400 };
    }
    const pingInterval = parsePingInterval(query.pi);
    if (typeof pingInterval === 'string') {
      // The connection is kept, with the default interval: the client's monitor is the one
      // that has to match it, and refusing would only make the client reconnect.
      this.logger.warn('ping interval ignored', { connectionId, reason: pingInterval });
    }
    const base = {
      connectionId,
      protocol,
      connectedAt: this.clock.now(),
      ...(endpoint ? { endpoint } : {}),
      ...(typeof pingInterval === 'number' ? { pingInterval } : {}),
    };

    let identity: string;
    try {
      identity = await this.identify(query.jid);
    } catch (error) {
      if (!(error instanceof UnauthorizedError)) throw error;
      this.logger.warn('connection unauthorized', { connectionId, reason: error.reason });
      await this.store.putConnection({
        ...base,
        identity: '',
        sid: '',
        refusal: error.reason === 'expired' ? 'token_expired' : 'unauthorized',
      });
      return { statusCode: 200, protocol };
    }

    const sid = this.newSid();
    const connection: ConnectionRecord = { ...base, identity, sid };
    await this.store.putConnection(connection);

    let previous = query.sid;
    if (previous && utf8Bytes(previous) > MAX_SID_BYTES) {
      // Never a key lookup: the sessions table refuses keys over 2 KB. A new session instead.
      this.logger.warn('session not restored: sid too long', {
        connectionId,
        bytes: utf8Bytes(previous),
        limit: MAX_SID_BYTES,
      });
      previous = undefined;
    }
    let restored: SessionSubscription[] | undefined;
    if (protocol === EXT_PROTOCOL && previous) {
      const old = Session.decode(await this.broker.restoreSession(previous));
      if (old && old.identity === identity && old.protocol === EXT_PROTOCOL) {
        restored = [...old.subscriptions];
        await Promise.all(
          restored.map((s) =>
            this.store.addSubscription({ connectionId, ...s, ...(endpoint ? { endpoint } : {}) }),
          ),
        );
      } else {
        this.logger.info('session not restored', {
          connectionId,
          reason: old ? 'identity differs' : 'unknown or expired sid',
        });
      }
    }
    await this.broker.commitSession(
      sid,
      new Session({
        identity,
        protocol,
        subscriptions: restored ?? [],
        ...(restored ? { restoredIds: [...new Set(restored.map((s) => s.identifier))] } : {}),
      }),
    );
    this.logger.info('connected', {
      connectionId,
      sid: fingerprint(sid),
      protocol,
      restored: restored?.length,
    });
    return { statusCode: 200, protocol };
  }

  /**
   * Delivers `welcome` (with `restored` and `restored_ids` after a restore), or for a
   * refused connection `disconnect unauthorized` followed by a close. Returns whether the
   * client has it: `false` when the connection is unknown or not reachable yet (call again).
   * A second call after a delivered welcome sends nothing. `known` saves the read of the
   * connection (the pinger has it).
   */
  async welcome(connectionId: string, known?: ConnectionRecord): Promise<boolean> {
    const connection = known ?? (await this.store.getConnection(connectionId));
    if (!connection) {
      this.logger.warn('welcome: unknown connection', { connectionId });
      return false;
    }
    const { endpoint } = connection;
    if (!connection.sid) {
      const reason = connection.refusal ?? 'unauthorized';
      const frame = { type: 'disconnect', reason, reconnect: false };
      const result = await this.api.post(connectionId, JSON.stringify(frame), endpoint);
      if (result === 'gone') return false;
      await this.api.close(connectionId, endpoint);
      return true;
    }
    // The welcome is claimed in the session (a conditional write) before it is posted, so
    // of concurrent calls only one posts; a post that does not reach the client releases it.
    let claim: { restoredIds?: readonly string[] } | undefined;
    await this.updateSession(connection.sid, async (bytes) => {
      const current = Session.decode(bytes);
      claim = current?.welcomed
        ? undefined
        : { ...(current?.restoredIds ? { restoredIds: current.restoredIds } : {}) };
      return claim ? this.sessionOf(connection, current, { welcomed: true }) : undefined;
    });
    if (!claim) return true;
    const { restoredIds } = claim;
    const frame = restoredIds
      ? { type: 'welcome', sid: connection.sid, restored: true, restored_ids: restoredIds }
      : { type: 'welcome', sid: connection.sid };
    let result: 'sent' | 'gone';
    try {
      result = await this.api.post(connectionId, JSON.stringify(frame), endpoint);
    } catch (error) {
      await this.releaseWelcome(connection, restoredIds);
      throw error;
    }
    if (result === 'sent') return true;
    await this.releaseWelcome(connection, restoredIds);
    return false;
  }

  /**
   * `$disconnect`: finishes the session (its TTL starts) and removes the connection and its
   * subscriptions ({@link disconnectConnection}, also what a gone connection gets).
   */
  async disconnect(connectionId: string): Promise<void> {
    await disconnectConnection(this.gone, connectionId);
    this.logger.info('disconnected', { connectionId });
  }

  /**
   * `$default`: handles one client frame. Every refused frame is logged as a
   * {@link ProtocolError} (answered with `reject_subscription` or `reject_history` where
   * the client waits for one); this method never throws.
   */
  async receive(connectionId: string, frame: string, endpoint?: string): Promise<void> {
    try {
      await this.handle(connectionId, frame, endpoint);
    } catch (error) {
      if (error instanceof ProtocolError) {
        this.logger.warn(`frame refused: ${error.message}`, {
          connectionId,
          command: error.command,
          identifier: loggedIdentifier(error.identifier),
        });
      } else {
        this.logger.error('frame failed', {
          connectionId,
          error: errorMessage(error),
        });
      }
    }
  }

  private async identify(token: string | undefined): Promise<string> {
    if (!token) {
      if (this.config.allowAnonymous) return '';
      throw new UnauthorizedError('no token: expected a JWT in jid', { reason: 'missing' });
    }
    const { identity } = await verifyConnectToken(token, this.config.jwtSecret ?? '', this.clock, {
      clockSkewSeconds: this.config.jwtClockSkew,
      ...(this.config.jwtIssuer !== undefined ? { issuer: this.config.jwtIssuer } : {}),
      ...(this.config.jwtAudience !== undefined ? { audience: this.config.jwtAudience } : {}),
    });
    return identity;
  }

  private async handle(connectionId: string, raw: string, endpoint?: string): Promise<void> {
    const bytes = Buffer.byteLength(raw, 'utf8');
    if (bytes > this.config.maxFrameBytes) {
      throw new ProtocolError(
        `frame of ${bytes} bytes is over the limit of ${this.config.maxFrameBytes}`,
        { connectionId },
      );
    }
    let msg: ClientFrame;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        throw new Error('not an object');
      }
      msg = parsed as ClientFrame;
    } catch (cause) {
      throw new ProtocolError('frame is not a JSON object', { connectionId, cause });
    }
    const command = typeof msg.command === 'string' ? msg.command : undefined;
    if (!command) throw new ProtocolError('frame has no command', { connectionId });
    if (command === 'pong') return;

    const found = await this.store.getConnection(connectionId);
    if (!found) throw new ProtocolError('unknown connection', { connectionId, command });
    if (!found.sid)
      throw new ProtocolError('connection is unauthorized', { connectionId, command });
    const connection = endpoint && !found.endpoint ? { ...found, endpoint } : found;
    const target = endpoint ?? found.endpoint;

    const identifier = typeof msg.identifier === 'string' ? msg.identifier : undefined;
    const known = [
      'subscribe',
      'unsubscribe',
      'message',
      'whisper',
      ...(connection.protocol === EXT_PROTOCOL ? ['history'] : []),
    ];
    if (!known.includes(command)) {
      throw new ProtocolError(`unknown command: ${command}, expected one of ${known.join(', ')}`, {
        connectionId,
        command,
      });
    }
    if (identifier === undefined) {
      throw new ProtocolError('frame has no identifier', { connectionId, command });
    }
    const postRaw = (frame: string) => this.api.post(connectionId, frame, target);
    const post = (frame: object) => postRaw(JSON.stringify(frame));

    if (command === 'subscribe') {
      await this.subscribe(connection, identifier, msg.history, postRaw, target);
      return;
    }
    const subs = (await this.store.subscriptionsOf(connectionId)).filter(
      (s) => s.identifier === identifier,
    );
    if (subs.length === 0) {
      if (command === 'history') await post({ type: 'reject_history', identifier });
      throw new ProtocolError('unknown identifier: subscribe first', {
        connectionId,
        command,
        identifier,
      });
    }
    switch (command) {
      case 'unsubscribe':
        await Promise.all(
          subs.map((s) => this.store.removeSubscription(connectionId, s.stream, identifier)),
        );
        await this.commit(connection);
        return;
      case 'history':
        await this.serveHistory(connectionId, identifier, subs, msg.history, postRaw);
        return;
      case 'message':
        throw new ProtocolError(`channel ${PUBSUB_CHANNEL} has no actions`, {
          connectionId,
          command,
          identifier,
        });
      case 'whisper':
        await this.whisper(connectionId, identifier, subs, msg.data);
        return;
    }
  }

  private async subscribe(
    connection: ConnectionRecord,
    identifier: string,
    history: unknown,
    postRaw: (frame: string) => Promise<'sent' | 'gone'>,
    endpoint: string | undefined,
  ): Promise<void> {
    const { connectionId } = connection;
    const post = (frame: object) => postRaw(JSON.stringify(frame));
    const resolved = this.resolveStream(identifier);
    if (typeof resolved === 'string') {
      await post({ type: 'reject_subscription', identifier });
      throw new ProtocolError(`subscription rejected: ${resolved}`, {
        connectionId,
        command: 'subscribe',
        identifier,
      });
    }
    const sub: Subscription = {
      connectionId,
      identifier,
      stream: resolved.stream,
      whisper: resolved.whisper,
      ...(endpoint ? { endpoint } : {}),
    };
    if (!(await this.store.addSubscription(sub))) {
      // The client re-sends subscribe after 5 s without an answer, while the first one may
      // still be under way in another Lambda. Exactly one call confirms (and serves history):
      // the one that stored the subscription. A second confirm would make the client
      // unsubscribe ("subscription not found"), as AnyCable's clients do.
      this.logger.info('subscribe: already subscribed, not confirmed again', {
        connectionId,
        identifier: loggedIdentifier(identifier),
      });
      return;
    }
    try {
      await this.commit(connection);
      await post({ type: 'confirm_subscription', identifier });
    } catch (error) {
      // Not confirmed: the subscription goes, so that the client's retry starts over.
      await this.store.removeSubscription(connectionId, sub.stream, identifier);
      await this.commit(connection).catch((cause: unknown) =>
        this.logger.error('subscribe: session not rolled back', {
          connectionId,
          error: errorMessage(cause),
        }),
      );
      throw error;
    }
    if (history !== undefined && connection.protocol === EXT_PROTOCOL) {
      await this.serveHistory(connectionId, identifier, [sub], history, postRaw);
    }
  }

  /**
   * The stream of a `$pubsub` identifier, or why it is refused. The identifier and the
   * stream become the subscription's sort key: each has a limit
   * ({@link MAX_IDENTIFIER_BYTES}, {@link MAX_STREAM_BYTES}).
   */
  private resolveStream(identifier: string): { stream: string; whisper: boolean } | string {
    const resolved = this.streamOf(identifier);
    if (typeof resolved === 'string') return resolved;
    const bytes = utf8Bytes(resolved.stream);
    if (bytes > MAX_STREAM_BYTES) {
      return `stream name is ${bytes} bytes, the limit is ${MAX_STREAM_BYTES} (UTF-8)`;
    }
    return resolved;
  }

  private streamOf(identifier: string): { stream: string; whisper: boolean } | string {
    const idBytes = utf8Bytes(identifier);
    if (idBytes > MAX_IDENTIFIER_BYTES) {
      return `identifier is ${idBytes} bytes, the limit is ${MAX_IDENTIFIER_BYTES} (UTF-8)`;
    }
    let params: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(identifier);
      if (typeof parsed !== 'object' || parsed === null) return 'identifier is not a JSON object';
      params = parsed as Record<string, unknown>;
    } catch {
      return 'identifier is not JSON';
    }
    if (params.channel !== PUBSUB_CHANNEL) {
      return `unknown channel: ${String(params.channel)}, expected ${PUBSUB_CHANNEL}`;
    }
    if (typeof params.signed_stream_name === 'string') {
      const stream = verifySignedStreamName(
        params.signed_stream_name,
        this.config.streamsSecret ?? '',
      );
      if (!stream) return 'signed stream name does not verify';
      return { stream, whisper: this.config.whisperOnSigned };
    }
    if (typeof params.stream_name === 'string' && params.stream_name) {
      if (!this.config.publicStreams) return 'public streams are disabled';
      return { stream: params.stream_name, whisper: true };
    }
    return 'identifier names no stream_name or signed_stream_name';
  }

  private async serveHistory(
    connectionId: string,
    identifier: string,
    subs: readonly Subscription[],
    history: unknown,
    postRaw: (frame: string) => Promise<'sent' | 'gone'>,
  ): Promise<void> {
    const post = (frame: object) => postRaw(JSON.stringify(frame));
    const request = (
      typeof history === 'object' && history !== null ? history : {}
    ) as HistoryRequest;
    const positions = (
      typeof request.streams === 'object' && request.streams !== null ? request.streams : {}
    ) as Record<string, unknown>;
    const streams = [...new Set(subs.map((s) => s.stream))];
    const invalid = invalidHistoryRequest(request, positions, streams);
    if (invalid) {
      await post({ type: 'reject_history', identifier });
      throw new ProtocolError(`history rejected: ${invalid}`, {
        connectionId,
        command: 'history',
        identifier,
      });
    }
    const since = typeof request.since === 'number' ? request.since : undefined;
    const missed: StreamMessage[] = [];
    try {
      for (const stream of streams) {
        const at = positions[stream] as { epoch?: unknown; offset?: unknown } | undefined;
        if (at && typeof at.epoch === 'string' && typeof at.offset === 'number') {
          missed.push(...(await this.broker.historyFrom(stream, at.epoch, at.offset)));
        } else if (since !== undefined) {
          missed.push(...(await this.broker.historySince(stream, since)));
        }
      }
    } catch (error) {
      await post({ type: 'reject_history', identifier });
      if (error instanceof HistoryError) {
        throw new ProtocolError(`history rejected: ${error.message}`, {
          connectionId,
          command: 'history',
          identifier,
          cause: error,
        });
      }
      throw error;
    }
    for (const m of missed) {
      if ((await postRaw(broadcastFrame(identifier, m))) === 'gone') return;
    }
    await post({ type: 'confirm_history', identifier });
  }

  private async whisper(
    connectionId: string,
    identifier: string,
    subs: readonly Subscription[],
    data: unknown,
  ): Promise<void> {
    if (typeof data !== 'object' || data === null) {
      throw new ProtocolError('whisper data must be an object', {
        connectionId,
        command: 'whisper',
        identifier,
      });
    }
    const sub = subs[0]!;
    if (!sub.whisper) {
      throw new ProtocolError(`whispers are not allowed on stream ${sub.stream}`, {
        connectionId,
        command: 'whisper',
        identifier,
      });
    }
    const report = await this.fanOut.deliver(
      sub.stream,
      (other) => JSON.stringify({ identifier: other.identifier, message: data }),
      connectionId,
    );
    if (report.failed.length > 0) {
      this.logger.error('whisper: posts failed', {
        stream: sub.stream,
        failed: report.failed.length,
      });
    }
  }

  /**
   * Stores the session of `connection` from its current subscriptions. Frames of one
   * connection run in separate Lambdas at once: the subscriptions are read after the
   * session, and a write over a session another frame committed in between is redone.
   */
  private async commit(connection: ConnectionRecord): Promise<void> {
    await this.updateSession(connection.sid, (bytes) =>
      this.sessionOf(connection, Session.decode(bytes)),
    );
  }

  /** Gives a claimed welcome back (its post did not reach the client): the next call posts it. */
  private async releaseWelcome(
    connection: ConnectionRecord,
    restoredIds: readonly string[] | undefined,
  ): Promise<void> {
    try {
      await this.updateSession(connection.sid, async (bytes) => {
        const current = Session.decode(bytes);
        if (!current?.welcomed) return undefined;
        return this.sessionOf(connection, current, {
          welcomed: false,
          ...(restoredIds ? { restoredIds } : {}),
        });
      });
    } catch (error) {
      this.logger.error('welcome: claim not released', {
        connectionId: connection.connectionId,
        error: errorMessage(error),
      });
    }
  }

  /** The session of `connection`: `current` with `changes`, subscriptions read from the store now. */
  private async sessionOf(
    connection: ConnectionRecord,
    current: SessionState | undefined,
    changes: Pick<SessionState, 'welcomed' | 'restoredIds'> = {},
  ): Promise<Session> {
    const subs = await this.store.subscriptionsOf(connection.connectionId);
    const welcomed = changes.welcomed ?? current?.welcomed ?? false;
    const restoredIds = changes.restoredIds ?? current?.restoredIds;
    return new Session({
      identity: connection.identity,
      protocol: connection.protocol,
      subscriptions: subs.map((s) => ({
        identifier: s.identifier,
        stream: s.stream,
        whisper: s.whisper ?? false,
      })),
      welcomed,
      ...(!welcomed && restoredIds ? { restoredIds } : {}),
    });
  }

  /**
   * Read-modify-write of a session: the broker's {@link Broker.updateSession} (optimistic,
   * retried on a concurrent write) where it has one, else a read then a commit.
   */
  private async updateSession(sid: string, update: SessionUpdate): Promise<boolean> {
    if (this.broker.updateSession) return this.broker.updateSession(sid, update);
    const next = await update(await this.broker.restoreSession(sid));
    if (!next) return false;
    await this.broker.commitSession(sid, next);
    return true;
  }
}

/**
 * An identifier as logged: a signed stream name is a bearer credential for its stream,
 * so an identifier that carries one is logged as a fingerprint.
 */
function loggedIdentifier(identifier: string | undefined): string | undefined {
  if (identifier === undefined || !identifier.includes('signed_stream_name')) return identifier;
  return `signed:${fingerprint(identifier)}`;
}

/**
 * Why a history request is malformed, or `undefined`: `since` must be a number of seconds
 * >= 0, and the position of a subscribed stream an object with a non-empty string `epoch`
 * and an integer `offset` >= 0 (a client error, answered with `reject_history`).
 */
function invalidHistoryRequest(
  request: HistoryRequest,
  positions: Record<string, unknown>,
  streams: readonly string[],
): string | undefined {
  const { since } = request;
  if (since !== undefined && (typeof since !== 'number' || !Number.isFinite(since) || since < 0)) {
    return `since must be a number of seconds >= 0, got: ${JSON.stringify(since)}`;
  }
  for (const stream of streams) {
    const at = positions[stream];
    if (at === undefined) continue;
    if (typeof at !== 'object' || at === null) return 'a stream position must be an object';
    const { epoch, offset } = at as { epoch?: unknown; offset?: unknown };
    if (typeof epoch !== 'string' || epoch.length === 0) {
      return `epoch must be a non-empty string, got: ${JSON.stringify(epoch)}`;
    }
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
      return `offset must be an integer >= 0, got: ${JSON.stringify(offset)}`;
    }
  }
  return undefined;
}
