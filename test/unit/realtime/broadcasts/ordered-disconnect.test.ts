import { describe, expect, it } from 'vitest';
import {
  type BroadcastRequestItem,
  MAX_ORDERED_STREAMS,
  orderedDisconnect,
  type RemoteCommand,
  RemoteCommandEvent,
  withOrderedDisconnects,
} from '../../../../lib/core';
import { MemoryConnectionStore } from '../../../../lib/testing';

const EXT = 'actioncable-v1-ext-json';

/** Alice on two connections (a1: room, other; a2: room, third), Bob on one (b1: room), Carl anonymous (x1: solo). */
async function store() {
  const s = new MemoryConnectionStore();
  const holds: [string, string | undefined, string[]][] = [
    ['a1', 'alice', ['room', 'other']],
    ['a2', 'alice', ['room', 'third']],
    ['b1', 'bob', ['room']],
    ['x1', undefined, ['solo']],
  ];
  for (const [connectionId, identity, streams] of holds) {
    await s.putConnection({
      connectionId,
      identity: identity ?? '',
      sid: `sid-${connectionId}`,
      protocol: EXT,
      connectedAt: 1,
    });
    for (const stream of streams) {
      await s.addSubscription({ connectionId, stream, identifier: `id-${stream}` });
    }
  }
  return s;
}

const disconnect = (payload: Record<string, unknown>): RemoteCommand => ({
  command: 'disconnect',
  payload: JSON.stringify(payload),
});
const payloads = (commands: readonly RemoteCommand[]) =>
  commands.map((c) => `${c.command} ${c.payload}`);

describe('orderedDisconnect (a remote disconnect put in order with broadcasts)', () => {
  it("precedes an identity's disconnect with a targeted unsubscribe of each stream it holds, on any connection", async () => {
    const kick = disconnect({ identity: 'alice', reconnect: false });
    const out = await orderedDisconnect(await store(), kick);
    expect(payloads(out.commands)).toEqual([
      'unsubscribe {"stream":"other","identity":"alice"}',
      'unsubscribe {"stream":"room","identity":"alice"}',
      'unsubscribe {"stream":"third","identity":"alice"}',
      `disconnect ${kick.payload}`,
    ]);
    expect(out.unordered).toBe(0);
    // Each unsubscribe is keyed by its stream: the same outbox partition and SQS group as the
    // stream's broadcasts.
    expect(out.commands.map((c) => RemoteCommandEvent.keyOf(c))).toEqual([
      'other',
      'room',
      'third',
      '$commands#alice',
    ]);
  });

  it("reads AnyCable's `identifier` as the identity, as the consumer does", async () => {
    const out = await orderedDisconnect(await store(), disconnect({ identifier: 'bob' }));
    expect(payloads(out.commands)).toEqual([
      'unsubscribe {"stream":"room","identity":"bob"}',
      'disconnect {"identifier":"bob"}',
    ]);
  });

  it("precedes a connection's disconnect with unsubscribes of that connection alone (also an anonymous one)", async () => {
    const s = await store();
    expect(
      payloads((await orderedDisconnect(s, disconnect({ connectionId: 'a1' }))).commands),
    ).toEqual([
      'unsubscribe {"stream":"other","connectionId":"a1"}',
      'unsubscribe {"stream":"room","connectionId":"a1"}',
      'disconnect {"connectionId":"a1"}',
    ]);
    expect(
      payloads((await orderedDisconnect(s, disconnect({ connectionId: 'x1' }))).commands),
    ).toEqual([
      'unsubscribe {"stream":"solo","connectionId":"x1"}',
      'disconnect {"connectionId":"x1"}',
    ]);
  });

  it.each([
    ['an unknown identity', disconnect({ identity: 'nobody' })],
    ['an unknown connection', disconnect({ connectionId: 'gone' })],
    ['no target', disconnect({ reconnect: false })],
    ['an empty identity', disconnect({ identity: '' })],
    ['a payload that is not JSON', { command: 'disconnect', payload: '{' }],
    ['an unsubscribe', { command: 'unsubscribe', payload: '{"stream":"room"}' }],
    ['an unknown command', { command: 'dance', payload: '{"identity":"alice"}' }],
  ])('answers %s as it is, reading nothing it needs not', async (_what, command) => {
    const out = await orderedDisconnect(await store(), command);
    expect(out.commands).toEqual([command]);
    expect(out.unordered).toBe(0);
  });

  it('puts at most maxStreams streams in order, by name, and counts the rest', async () => {
    const s = new MemoryConnectionStore();
    await s.putConnection({
      connectionId: 'c',
      identity: 'many',
      sid: 'sid-c',
      protocol: EXT,
      connectedAt: 1,
    });
    for (let i = 0; i < 5; i++) {
      await s.addSubscription({ connectionId: 'c', stream: `s${i}`, identifier: `i${i}` });
    }
    const out = await orderedDisconnect(s, disconnect({ identity: 'many' }), 3);
    expect(payloads(out.commands)).toEqual([
      'unsubscribe {"stream":"s0","identity":"many"}',
      'unsubscribe {"stream":"s1","identity":"many"}',
      'unsubscribe {"stream":"s2","identity":"many"}',
      'disconnect {"identity":"many"}',
    ]);
    expect(out.unordered).toBe(2);
    expect(MAX_ORDERED_STREAMS).toBeGreaterThanOrEqual(128);
  });
});

describe('withOrderedDisconnects (the items of POST /_broadcast)', () => {
  it("puts each disconnect's unsubscribes right before it, so a broadcast keeps its side of them", async () => {
    const items: BroadcastRequestItem[] = [
      { kind: 'broadcast', broadcast: { stream: 'room', data: '"before"' } },
      { kind: 'command', command: disconnect({ identity: 'bob' }) },
      { kind: 'broadcast', broadcast: { stream: 'room', data: '"after"' } },
      { kind: 'command', command: { command: 'unsubscribe', payload: '{"stream":"solo"}' } },
    ];
    const out = await withOrderedDisconnects(await store(), items);
    expect(out.unordered).toBe(0);
    expect(out.items).toEqual([
      items[0],
      {
        kind: 'command',
        command: { command: 'unsubscribe', payload: '{"stream":"room","identity":"bob"}' },
      },
      items[1],
      items[2],
      items[3],
    ]);
  });
});
