import type { Logger } from '../../kernel/logger.js';
import type { ConnectionApi, ConnectionRecord, ConnectionStore } from '../ports.js';
import { disconnectFrame, welcomeFrame } from '../protocol.js';
import type { ConnectionSessions } from '../session.js';

/** What a welcome uses. */
export interface WelcomeDeps {
  readonly store: ConnectionStore;
  readonly api: ConnectionApi;
  readonly sessions: ConnectionSessions;
  readonly logger: Logger;
}

/**
 * Delivers `welcome` (with `restored` and `restored_ids` after a restore), or for a
 * refused connection `disconnect unauthorized` followed by a close. Returns whether the
 * client has it: `false` when the connection is unknown or not reachable yet (call again).
 * A second call after a delivered welcome sends nothing. `known` saves the read of the
 * connection (the pinger has it).
 */
export async function welcome(
  deps: WelcomeDeps,
  connectionId: string,
  known?: ConnectionRecord,
): Promise<boolean> {
  const { api, sessions } = deps;
  const connection = known ?? (await deps.store.getConnection(connectionId));
  if (!connection) {
    deps.logger.warn('welcome: unknown connection', { connectionId });
    return false;
  }
  const { endpoint } = connection;
  if (!connection.sid) {
    const frame = disconnectFrame(connection.refusal ?? 'unauthorized', false);
    const result = await api.post(connectionId, frame, endpoint);
    if (result === 'gone') return false;
    await api.close(connectionId, endpoint);
    return true;
  }
  const claim = await sessions.claimWelcome(connection);
  if (!claim) return true;
  let result: 'sent' | 'gone';
  try {
    result = await api.post(
      connectionId,
      welcomeFrame(connection.sid, claim.restoredIds),
      endpoint,
    );
  } catch (error) {
    await sessions.releaseWelcome(connection, claim);
    throw error;
  }
  if (result === 'sent') return true;
  await sessions.releaseWelcome(connection, claim);
  return false;
}
