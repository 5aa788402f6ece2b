import { describe, expect, it } from 'vitest';
import {
  presenceOf,
  revocationKey,
  type Subscription,
  sessionStreamTarget,
} from '../../../../lib/core';
import { MemoryConnectionStore } from '../../../../lib/testing';
import { gatewayHarness, pubsub } from '../../../helpers/gateway';

/** A memory store that counts the reads of a stream's audience. */
class AudienceCountingStore extends MemoryConnectionStore {
  audienceReads = 0;

  override async *subscribersOf(stream: string, pageSize?: number) {
    this.audienceReads++;
    yield* super.subscribersOf(stream, pageSize);
  }

  override async readSlice(...args: Parameters<MemoryConnectionStore['readSlice']>) {
    this.audienceReads++;
    return super.readSlice(...args);
  }
}

const room = pubsub('room');

/**
 * Alice on two connections and Bob on one, all subscribed to `room` (and present on it, with
 * presence), Alice's first connection also on `other`: the gateway over memory adapters.
 */
async function setup({ presence = true } = {}) {
  const t = gatewayHarness({
    config: { publicStreams: true },
    ...(presence ? { presence: { ttlMs: 15_000 } } : {}),
    store: () => new AudienceCountingStore(),
  });
  for (const [connectionId, sub] of [
    ['a1', 'alice'],
    ['a2', 'alice'],
    ['b1', 'bob'],
  ] as const) {
    await t.open(connectionId, { sub });
    await t.send(connectionId, { command: 'subscribe', identifier: room });
    if (presence) {
      await t.send(connectionId, { command: 'join', identifier: room, presence: { id: sub } });
    }
  }
  await t.send('a1', { command: 'subscribe', identifier: pubsub('other') });
  const streamsOf = async (connectionId: string) =>
    (await t.store.subscriptionsOf(connectionId)).map((s: Subscription) => s.stream).sort();
  const unsubscribe = async (payload: Record<string, unknown>) => {
    await t.broker.handleCommand({ command: 'unsubscribe', payload });
    await Promise.all(t.delivered.splice(0));
  };
  return { ...t, streamsOf, unsubscribe };
}

describe('remote unsubscribe of one identity from a stream ({ stream, identity })', () => {
  it("removes that identity's subscriptions to the stream on each of its connections, and no other", async () => {
    const t = await setup();
    await t.unsubscribe({ stream: 'room', identity: 'alice' });
    expect(await t.streamsOf('a1')).toEqual(['other']);
    expect(await t.streamsOf('a2')).toEqual([]);
    expect(await t.streamsOf('b1')).toEqual(['room']);
    await t.publish('room', 'after');
    await t.publish('other', 'elsewhere');
    expect(t.messagesOf('a1')).toEqual(['elsewhere']);
    expect(t.messagesOf('a2')).toEqual([]);
    expect(t.messagesOf('b1')).toEqual(['after']);
    expect(t.logger.entries.find((e) => e.message === 'remote unsubscribe')?.fields).toEqual({
      stream: 'room',
      identity: 'alice',
      subscriptions: 2,
      // The memory index is never behind: one read of it finds nothing removed listed.
      indexChecks: 1,
    });
  });

  it('leaves the presence of the removed subscriptions only', async () => {
    const t = await setup();
    t.changes.splice(0);
    await t.unsubscribe({ stream: 'room', identity: 'alice' });
    expect(t.changes.map((c) => `${c.type} ${c.id}`)).toEqual(['leave alice']);
    const members = await presenceOf(t.presenceStore, 'room');
    expect(members.total).toBe(1);
    expect(members.records.map((r) => r.id)).toEqual(['bob']);
    expect(t.frames('b1').at(-1)).toEqual({
      type: 'presence',
      identifier: room,
      message: { type: 'leave', id: 'alice' },
    });
  });

  it("reads the identity's connections, never the stream's audience", async () => {
    // Without presence: a leave's frame to the stream's subscribers reads the audience.
    const t = await setup({ presence: false });
    const store = t.store as AudienceCountingStore;
    store.audienceReads = 0;
    await t.unsubscribe({ stream: 'room', identity: 'alice' });
    expect(store.audienceReads).toBe(0);
    // The stream-wide form reads it.
    await t.unsubscribe({ stream: 'room' });
    expect(store.audienceReads).toBeGreaterThan(0);
    expect(await t.streamsOf('b1')).toEqual([]);
  });

  it('removes nothing for an identity with no subscription to the stream', async () => {
    const t = await setup();
    await t.unsubscribe({ stream: 'room', identity: 'carol' });
    await t.unsubscribe({ stream: 'other', identity: 'bob' });
    for (const c of ['a1', 'a2', 'b1']) expect(await t.streamsOf(c)).toContain('room');
    expect(await t.streamsOf('a1')).toContain('other');
  });

  it.each([
    ['`identifier` (a channel identifier in this protocol)', { identifier: 'alice' }],
    ['both `identity` and `connectionId`', { identity: 'alice', connectionId: 'a1' }],
    ['an empty `connectionId`', { connectionId: '' }],
    ['a `connectionId` that is not a string', { connectionId: 7 }],
    ['`identity` and `identifier`', { identity: 'alice', identifier: 'alice' }],
    ['an empty `identity` (anonymous connections have none)', { identity: '' }],
    ['an `identity` that is not a string', { identity: 7 }],
  ])('refuses a payload with %s: nothing removed, never stream-wide', async (_what, extra) => {
    const t = await setup();
    await t.unsubscribe({ stream: 'room', ...extra });
    for (const c of ['a1', 'a2', 'b1']) expect(await t.streamsOf(c)).toContain('room');
    expect(t.logger.warnings().some((w) => w.startsWith('remote unsubscribe refused'))).toBe(true);
    const revoked = await t.revocations.revokedAt([{ kind: 'stream', name: 'room' }]);
    expect(revoked.size).toBe(0);
  });
});

describe('remote unsubscribe of one connection from a stream ({ stream, connectionId })', () => {
  it("removes that connection's subscription to the stream, and no other", async () => {
    const t = await setup();
    t.changes.splice(0);
    await t.unsubscribe({ stream: 'room', connectionId: 'a1' });
    expect(await t.streamsOf('a1')).toEqual(['other']);
    expect(await t.streamsOf('a2')).toEqual(['room']);
    expect(await t.streamsOf('b1')).toEqual(['room']);
    await t.publish('room', 'after');
    expect(t.messagesOf('a1')).toEqual([]);
    expect(t.messagesOf('a2')).toEqual(['after']);
    // Alice is still present on her other connection: no leave.
    expect(t.changes).toEqual([]);
    expect(t.logger.entries.find((e) => e.message === 'remote unsubscribe')?.fields).toEqual({
      stream: 'room',
      connectionId: 'a1',
      subscriptions: 1,
      indexChecks: 1,
    });
  });

  it("revokes the stream for that connection's session only", async () => {
    const t = await setup();
    const sid = (await t.store.getConnection('a1'))!.sid!;
    const other = (await t.store.getConnection('a2'))!.sid!;
    await t.unsubscribe({ stream: 'room', connectionId: 'a1' });
    const targets = [
      sessionStreamTarget(sid, 'room'),
      sessionStreamTarget(sid, 'other'),
      sessionStreamTarget(other, 'room'),
      { kind: 'stream', name: 'room' } as const,
    ];
    const revoked = await t.revocations.revokedAt(targets);
    expect([...revoked.keys()]).toEqual([revocationKey(targets[0]!)]);
  });

  it('leaves presence when it removes the last session of an id', async () => {
    const t = await setup();
    t.changes.splice(0);
    await t.unsubscribe({ stream: 'room', connectionId: 'b1' });
    expect(t.changes.map((c) => `${c.type} ${c.id}`)).toEqual(['leave bob']);
  });

  it('removes and revokes nothing for a connection that is not stored, or holds no such stream', async () => {
    const t = await setup();
    await t.unsubscribe({ stream: 'room', connectionId: 'nobody' });
    await t.unsubscribe({ stream: 'other', connectionId: 'b1' });
    for (const c of ['a1', 'a2', 'b1']) expect(await t.streamsOf(c)).toContain('room');
    const revoked = await t.revocations.revokedAt([
      sessionStreamTarget((await t.store.getConnection('b1'))!.sid!, 'other'),
    ]);
    // The stored connection's session is revoked for the stream all the same (a subscribe
    // racing the command could have stored it); the unknown connection has no session.
    expect(revoked.size).toBe(1);
  });
});
