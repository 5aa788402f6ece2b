import { forEachConcurrently } from '../../kernel/concurrency.js';
import type { ConnectionStore } from '../ports.js';
import { commandPayload, type RemoteCommand } from './events.js';
import type { BroadcastRequestItem } from './http-request.js';

/** What {@link orderedDisconnect} reads: the target's connections and what each holds. */
export type DisconnectReader = Pick<ConnectionStore, 'connectionsOf' | 'subscriptionsOf'>;

/**
 * The most streams one remote `disconnect` is put in order with: an identity holding more
 * (over many connections) gets a targeted `unsubscribe` for the first this many, by name,
 * and the rest are in no order with the disconnect ({@link OrderedDisconnect.unordered}).
 */
export const MAX_ORDERED_STREAMS = 1000;

/** Connections whose subscriptions are read at once. */
const READ_CONCURRENCY = 8;

/** The commands to commit for one remote command ({@link orderedDisconnect}). */
export interface OrderedDisconnect {
  /** Targeted `unsubscribe`s, one per stream the target holds, then the command itself. */
  readonly commands: RemoteCommand[];
  /** Streams the target held past {@link MAX_ORDERED_STREAMS}: in no order with the command. */
  readonly unordered: number;
}

/**
 * Puts a remote `disconnect` in order with every stream's broadcasts. A `disconnect` is keyed
 * by its target, not by a stream, so the broadcast consumer handles it in no order with them
 * (`remoteCommandKey`). This reads, when the command is about to be committed, the streams
 * its target holds (an identity's: `connectionsOf`, then `subscriptionsOf` each connection;
 * a connection's: its `subscriptionsOf`), and answers a targeted `unsubscribe`
 * per stream (`{ stream, identity }`, or `{ stream, connectionId }`), then the command.
 * Each `unsubscribe` is keyed by its stream: committed with the `disconnect` (one request,
 * or one transaction), it is handled before any broadcast committed later on its stream, so
 * none of those reaches the target on a stream it held. Any other command, or a `disconnect`
 * that names no target, is answered as it is.
 *
 * Not covered, and documented (docs/protocol.md, Remote commands): a subscription made after
 * this read (its connection is closed when the `disconnect` is handled, and gets until then
 * the broadcasts of that stream), and a connection stored a moment before that the identity
 * index does not list yet. Cost, before the write: 1 Query per connection, and for an
 * identity 1 Query of the identity index; then, when handled, each `unsubscribe` costs what a
 * targeted one does (docs/protocol.md).
 */
export async function orderedDisconnect(
  reader: DisconnectReader,
  command: RemoteCommand,
  maxStreams = MAX_ORDERED_STREAMS,
): Promise<OrderedDisconnect> {
  const target = disconnectTarget(command);
  if (!target) return { commands: [command], unordered: 0 };
  const connections =
    target.by === 'connectionId'
      ? [target.name]
      : (await reader.connectionsOf(target.name)).map((c) => c.connectionId);
  const streams = new Set<string>();
  await forEachConcurrently(connections, READ_CONCURRENCY, async (connectionId) => {
    for (const s of await reader.subscriptionsOf(connectionId)) streams.add(s.stream);
  });
  const names = [...streams].sort();
  const unsubscribes = names.slice(0, maxStreams).map(
    (stream): RemoteCommand => ({
      command: 'unsubscribe',
      payload: JSON.stringify({ stream, [target.by]: target.name }),
    }),
  );
  return {
    commands: [...unsubscribes, command],
    unordered: Math.max(0, names.length - maxStreams),
  };
}

/** Where an item of {@link withOrderedDisconnects}' answer comes from. */
export interface ItemOrigin {
  /** The index of the request item it is, or was added for. */
  readonly index: number;
  /** Whether it was added: a targeted `unsubscribe` before a remote `disconnect`. */
  readonly added: boolean;
}

/**
 * An HTTP broadcast request's items with each remote `disconnect` put in order
 * ({@link orderedDisconnect}): its `unsubscribe`s go right before it, so that a broadcast
 * earlier in the request is committed before them and one later after them. `unordered`
 * adds up what each left out; `origins[i]` says where `items[i]` comes from.
 */
export async function withOrderedDisconnects(
  reader: DisconnectReader,
  items: readonly BroadcastRequestItem[],
): Promise<{ items: BroadcastRequestItem[]; origins: ItemOrigin[]; unordered: number }> {
  const out: BroadcastRequestItem[] = [];
  const origins: ItemOrigin[] = [];
  let unordered = 0;
  for (const [index, item] of items.entries()) {
    if (item.kind !== 'command') {
      out.push(item);
      origins.push({ index, added: false });
      continue;
    }
    const ordered = await orderedDisconnect(reader, item.command);
    unordered += ordered.unordered;
    const last = ordered.commands.length - 1;
    for (const [i, command] of ordered.commands.entries()) {
      out.push({ kind: 'command', command });
      origins.push({ index, added: i < last });
    }
  }
  return { items: out, origins, unordered };
}

/**
 * The target of a remote `disconnect`, as the broadcast consumer reads it: `connectionId`,
 * else `identity` (or AnyCable's `identifier`), a non-empty string.
 */
function disconnectTarget(
  command: RemoteCommand,
): { by: 'connectionId' | 'identity'; name: string } | undefined {
  const p = command.command === 'disconnect' ? commandPayload(command) : undefined;
  if (p === undefined) return undefined;
  if (typeof p.connectionId === 'string') {
    return p.connectionId ? { by: 'connectionId', name: p.connectionId } : undefined;
  }
  const identity = p.identity ?? p.identifier;
  return typeof identity === 'string' && identity ? { by: 'identity', name: identity } : undefined;
}
