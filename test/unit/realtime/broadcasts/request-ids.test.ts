import { describe, expect, it } from 'vitest';
import {
  type BroadcastRequestItem,
  LambdacableError,
  RemoteCommandEvent,
  requestEventIds,
  requestFingerprint,
  withOrderedDisconnects,
} from '../../../../lib/core';
import { MemoryConnectionStore } from '../../../../lib/testing';

const BASE = `${'0'.repeat(12)}${'ab'.repeat(8)}`;

/** Bob on one connection, holding `streams`. */
async function bobHolding(streams: readonly string[]) {
  const s = new MemoryConnectionStore();
  await s.putConnection({
    connectionId: 'b1',
    identity: 'bob',
    sid: 'sid-b1',
    protocol: 'actioncable-v1-ext-json',
    connectedAt: 1,
  });
  for (const stream of streams) {
    await s.addSubscription({ connectionId: 'b1', stream, identifier: `id-${stream}` });
  }
  return s;
}

const request: BroadcastRequestItem[] = [
  { kind: 'broadcast', broadcast: { stream: 'room', data: '"before"' } },
  {
    kind: 'command',
    command: { command: 'disconnect', payload: JSON.stringify({ identity: 'bob' }) },
  },
  { kind: 'broadcast', broadcast: { stream: 'room', data: '"after"' } },
];

/** The request as the handler writes it under `base`: each message's key and event id. */
async function attempt(streamsBobHolds: readonly string[], base = BASE) {
  const ordered = await withOrderedDisconnects(await bobHolding(streamsBobHolds), request);
  const messages = ordered.items.map((item) => ({
    key:
      item.kind === 'broadcast' ? item.broadcast.stream : RemoteCommandEvent.keyOf(item.command)!,
  }));
  const ids = requestEventIds(base, messages, ordered.origins);
  return { ordered, messages, ids };
}

describe('requestEventIds (the event ids every attempt of a request gives again)', () => {
  it('tells where each message comes from: a disconnect’s unsubscribes are added for its item', async () => {
    const { ordered } = await attempt(['room']);
    expect(ordered.origins).toEqual([
      { index: 0, added: false },
      { index: 1, added: true },
      { index: 1, added: false },
      { index: 2, added: false },
    ]);
  });

  it('gives every attempt the same ids, all different, starting with the base', async () => {
    const first = await attempt(['room', 'other']);
    const retry = await attempt(['room', 'other']);
    expect(retry.ids).toEqual(first.ids);
    expect(new Set(first.ids).size).toBe(first.ids.length);
    for (const id of first.ids) expect(id.startsWith(BASE)).toBe(true);
    expect((await attempt(['room'], `${'0'.repeat(12)}${'cd'.repeat(8)}`)).ids).not.toContain(
      first.ids[0],
    );
  });

  it('sorts the ids of one key in the request’s order', async () => {
    const { messages, ids } = await attempt(['room']);
    const room = ids.filter((_, i) => messages[i]!.key === 'room');
    expect(room).toHaveLength(3); // before, bob's unsubscribe, after
    expect([...room].sort()).toEqual(room);
  });

  it('keeps the ids two attempts share when the target holds other streams by then', async () => {
    const first = await attempt(['room']);
    const retry = await attempt(['room', 'other']);
    const idOf = (a: typeof first, key: string, n = 0) =>
      a.ids.filter((_, i) => a.messages[i]!.key === key)[n];
    for (const n of [0, 1, 2]) expect(idOf(retry, 'room', n)).toBe(idOf(first, 'room', n));
    expect(first.ids).not.toContain(idOf(retry, 'other'));
    expect(new Set(retry.ids).size).toBe(retry.ids.length);
  });

  it('refuses messages and origins that do not pair up', () => {
    expect(() => requestEventIds(BASE, [{ key: 'a' }], [])).toThrow(LambdacableError);
  });
});

describe('requestFingerprint (what a retry’s body must match)', () => {
  it('is the same for the same items and differs for others', () => {
    const same = JSON.parse(JSON.stringify(request)) as BroadcastRequestItem[];
    expect(requestFingerprint(same)).toBe(requestFingerprint(request));
    expect(requestFingerprint(request.slice(1))).not.toBe(requestFingerprint(request));
  });
});
