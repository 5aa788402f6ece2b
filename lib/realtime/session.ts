import type { Cacheable, SessionCache } from '../broker/types.js';
import { errorMessage } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import type { ConnectionRecord, ConnectionStore, Subscription } from './ports.js';

/** A subscription as kept in the session cache. */
export interface SessionSubscription {
  readonly identifier: string;
  readonly stream: string;
  readonly whisper: boolean;
  /** When it was subscribed (ms): a remote `unsubscribe` at or after it revokes it. */
  readonly subscribedAt?: number;
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
  /**
   * When `subscriptions` were read (ms since the epoch): at connect, and when the connection
   * ended. On restore, a remote `unsubscribe` at or after it revokes a subscription stored
   * without its own `subscribedAt`. Absent in sessions of earlier versions: every
   * revocation applies.
   */
  readonly writtenAt?: number;
  /**
   * When the session started (ms since the epoch): a remote `disconnect` at or after it ends
   * it. Absent in sessions of earlier versions: every such revocation applies.
   */
  readonly startedAt?: number;
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
      const time = (t: unknown) => (typeof t === 'number' && Number.isFinite(t) ? t : undefined);
      const { writtenAt: w, startedAt: st, ...rest } = s;
      const writtenAt = time(w);
      const startedAt = time(st);
      return {
        ...rest,
        identity: s.identity,
        protocol: String(s.protocol ?? ''),
        subscriptions,
        ...(writtenAt === undefined ? {} : { writtenAt }),
        ...(startedAt === undefined ? {} : { startedAt }),
      };
    } catch {
      return undefined;
    }
  }
}

/** A welcome this call may post: no other call claimed it, and none delivered it. */
export interface WelcomeClaim {
  /** The identifiers the welcome announces as restored, if the session was restored. */
  readonly restoredIds?: readonly string[];
}

/**
 * The sessions of connections, read-modify-written over the {@link SessionCache}. A session
 * is written at connect (with what was restored), when its welcome is claimed, and when the
 * connection ends ({@link closeSession}, with the subscriptions it held then): never per
 * subscribe, so that a subscribe costs the same whatever the connection holds. A session
 * whose close was missed (API Gateway's `$disconnect` is best effort) restores what it held
 * at connect; the client subscribes again to the rest (AnyCable's `restored_ids`).
 */
export class ConnectionSessions {
  constructor(
    private readonly sessions: SessionCache,
    private readonly store: Pick<ConnectionStore, 'subscriptionsOf'>,
    private readonly logger: Logger,
  ) {}

  /** The stored session of `sid`, or `undefined` when unknown, expired or not a session. */
  async restore(sid: string): Promise<SessionState | undefined> {
    return Session.decode(await this.sessions.restoreSession(sid));
  }

  /** Stores the first session of a connection. */
  async start(sid: string, state: SessionState): Promise<void> {
    await this.sessions.commitSession(sid, new Session(state));
  }

  /**
   * Claims the welcome of `connection` in its session (a conditional write), so that of
   * concurrent calls only one posts it: the claim, or `undefined` when another call claimed
   * or delivered it. A claim whose post does not reach the client goes back with
   * {@link releaseWelcome}.
   */
  async claimWelcome(connection: ConnectionRecord): Promise<WelcomeClaim | undefined> {
    let claim: WelcomeClaim | undefined;
    await this.sessions.updateSession(connection.sid, async (bytes) => {
      const current = Session.decode(bytes);
      claim = current?.welcomed
        ? undefined
        : { ...(current?.restoredIds ? { restoredIds: current.restoredIds } : {}) };
      return claim ? this.sessionOf(connection, current, { welcomed: true }) : undefined;
    });
    return claim;
  }

  /** Gives a claimed welcome back (its post did not reach the client): the next call posts it. */
  async releaseWelcome(connection: ConnectionRecord, claim: WelcomeClaim): Promise<void> {
    const { restoredIds } = claim;
    try {
      await this.sessions.updateSession(connection.sid, async (bytes) => {
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

  /**
   * The session of `connection`: `current` with `changes`; its subscriptions as stored, or
   * read from the store when there is no session to keep them from.
   */
  private async sessionOf(
    connection: ConnectionRecord,
    current: SessionState | undefined,
    changes: Pick<SessionState, 'welcomed' | 'restoredIds'> = {},
  ): Promise<Session> {
    const writtenAt = Date.now();
    const subscriptions =
      current?.subscriptions ??
      sessionSubscriptions(await this.store.subscriptionsOf(connection.connectionId));
    const welcomed = changes.welcomed ?? current?.welcomed ?? false;
    const restoredIds = changes.restoredIds ?? current?.restoredIds;
    return new Session({
      identity: connection.identity,
      protocol: connection.protocol,
      subscriptions,
      welcomed,
      ...(!welcomed && restoredIds ? { restoredIds } : {}),
      writtenAt: current ? (current.writtenAt ?? 0) : writtenAt,
      startedAt: current ? (current.startedAt ?? 0) : writtenAt,
    });
  }
}

/** Subscriptions as the session keeps them. */
export function sessionSubscriptions(subs: readonly Subscription[]): SessionSubscription[] {
  return subs.map((s) => ({
    identifier: s.identifier,
    stream: s.stream,
    whisper: s.whisper ?? false,
    ...(s.subscribedAt === undefined ? {} : { subscribedAt: s.subscribedAt }),
  }));
}

/** Where sessions are updated and finished: the session cache. */
export type SessionCloser = Pick<SessionCache, 'updateSession' | 'finishSession'>;

/**
 * Stores, when a connection ends, the subscriptions it held (`subs`, read at `readAt` ms),
 * so that a restore brings back what the connection had at its end, then finishes the
 * session (its TTL starts). A session that is unknown or expired is left alone.
 */
export async function closeSession(
  sessions: SessionCloser,
  sid: string,
  subs: readonly Subscription[],
  readAt: number,
): Promise<void> {
  await sessions.updateSession(sid, async (bytes) => {
    const current = Session.decode(bytes);
    if (!current) return undefined;
    return new Session({
      ...current,
      subscriptions: sessionSubscriptions(subs),
      writtenAt: readAt,
    });
  });
  await sessions.finishSession(sid);
}
