import type { Clock } from '../../kernel/clock.js';
import { ProtocolError } from '../../kernel/errors.js';
import type { ConnectionStore, PostFrame, Subscription } from '../ports.js';
import { presenceErrorFrame, presenceFrame } from '../protocol.js';
import type { PresenceStore } from './ports.js';
import { checkPresence } from './presence.js';
import { DEFAULT_PRESENCE_INFO_LIMIT, type PresenceSettings } from './settings.js';

/** What the presence commands use. */
export interface PresenceCommandDeps {
  /** Absent: presence is off, and every presence command is refused. */
  readonly presence: PresenceSettings | undefined;
  readonly clock: Clock;
  /** Read again after a join: a connection that ended meanwhile leaves no session behind. */
  readonly store: Pick<ConnectionStore, 'getConnection'>;
}

/**
 * `join` (or the `presence` of a `subscribe`): makes the connection present on the
 * subscription's stream as `presence.id` with `presence.info`. The store decides whether
 * that is a `join` for the stream's subscribers (an id not yet present) and writes it. A
 * presence object that is malformed or over a limit (id 128 bytes, info 1 KB) is refused
 * with an `error` to the sender alone, and thrown as a {@link ProtocolError}.
 */
export async function joinPresence(
  deps: PresenceCommandDeps,
  sub: Subscription,
  presence: unknown,
  post: PostFrame,
): Promise<void> {
  const { connectionId, identifier } = sub;
  const refuse = async (reason: string, message: string): Promise<never> => {
    await post(presenceErrorFrame(identifier, reason));
    throw new ProtocolError(`presence join refused: ${message}`, {
      connectionId,
      command: 'join',
      identifier,
    });
  };
  const settings = deps.presence;
  if (!settings) return refuse('presence_disabled', 'presence is off on this server');
  if (typeof presence !== 'object' || presence === null || Array.isArray(presence)) {
    return refuse('malformed', '"presence" must be an object {"id","info"}');
  }
  const { id, info } = presence as Record<string, unknown>;
  const check = checkPresence(id, info);
  if (!check.ok) return refuse(check.refusal.reason, check.refusal.message);
  try {
    await settings.store.join(sub.stream, connectionId, check.id, info, deps.clock.now());
  } catch (error) {
    // Not stored (a throttled or conflicting write, given up on): the sender may join again.
    await post(presenceErrorFrame(identifier, 'unavailable'));
    throw error;
  }
  // A join's frame and the connection's `$disconnect` are not ordered: `$disconnect` removes
  // the connection, then drops its sessions. A join stored before that drop is dropped with
  // the rest; one stored after it finds the connection gone here, and is taken back.
  if (!(await deps.store.getConnection(connectionId))) {
    await settings.store.leave(sub.stream, connectionId, deps.clock.now());
    throw new ProtocolError('presence join taken back: the connection ended meanwhile', {
      connectionId,
      command: 'join',
      identifier,
    });
  }
}

/**
 * `leave`, and an `unsubscribe`: the connection is no longer present on the stream; a `leave`
 * for its subscribers when it was the id's last session. A connection that is not present
 * changes nothing: thrown as a {@link ProtocolError} (logged), no frame to anyone.
 */
export async function leavePresence(
  deps: PresenceCommandDeps,
  sub: Subscription,
  command: 'leave' | 'unsubscribe',
): Promise<void> {
  const settings = deps.presence;
  if (!settings) return;
  const { id } = await settings.store.leave(sub.stream, sub.connectionId, deps.clock.now());
  if (id === undefined && command === 'leave') {
    throw new ProtocolError('presence leave: the connection is not present on this stream', {
      connectionId: sub.connectionId,
      command,
      identifier: sub.identifier,
    });
  }
}

/**
 * `presence`: answers `info` with the stream's members, `total` exact and at most
 * `infoLimit` `records` (in id order); a failed read is answered `error`: the client's
 * `info()` never waits for nothing.
 */
export async function presenceInfo(
  deps: PresenceCommandDeps,
  sub: Subscription,
  post: PostFrame,
): Promise<void> {
  const settings = deps.presence;
  if (!settings) {
    await post(presenceErrorFrame(sub.identifier, 'presence_disabled'));
    throw new ProtocolError('presence is off on this server', {
      connectionId: sub.connectionId,
      command: 'presence',
      identifier: sub.identifier,
    });
  }
  let members: Awaited<ReturnType<PresenceStore['members']>>;
  try {
    members = await settings.store.members(
      sub.stream,
      deps.clock.now(),
      settings.infoLimit ?? DEFAULT_PRESENCE_INFO_LIMIT,
    );
  } catch (error) {
    await post(presenceErrorFrame(sub.identifier, 'unavailable'));
    throw error;
  }
  await post(
    presenceFrame(sub.identifier, {
      type: 'info',
      total: members.total,
      records: members.records.map((r) => (r.info === undefined ? { id: r.id } : r)),
    }),
  );
}
