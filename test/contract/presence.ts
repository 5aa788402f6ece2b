import { beforeEach, describe, expect, it } from 'vitest';
import {
  bucketOf,
  LimitExceededError,
  MAX_PRESENCE_ID_BYTES,
  MAX_PRESENCE_INFO_BYTES,
  type PresenceChange,
  type PresenceLeave,
  type PresenceStore,
  ProtocolError,
} from '../../lib/core';

let n = 0;
const uid = (label: string) => `${label}-${process.pid}-${Date.now()}-${++n}`;
/** In the year 2100, so that DynamoDB Local's TTL sweeper never deletes what a test reads. */
const T0 = Date.UTC(2100, 0, 1);
const TTL = 15_000;

/** The leaves on `stream` (the store may hold other tests' departures). */
const on = (stream: string, leaves: readonly PresenceLeave[]) =>
  leaves.filter((l) => l.stream === stream);

/** A pause of 0–2 ms, so that concurrent calls interleave differently each run. */
const jitter = () => new Promise((r) => setTimeout(r, Math.floor(Math.random() * 3)));

/** Options of {@link presenceStoreContract}. */
export interface PresenceContractOptions {
  /** Random interleavings per concurrency test. @default 50 */
  readonly trials?: number;
}

/** A store under test, and the changes it wrote with its writes (its outbox). */
export interface PresenceFixture {
  readonly store: PresenceStore;
  /** The changes on `stream` that were committed, in the order they were written. */
  committed(stream: string): Promise<PresenceChange[]>;
}

/** Joins minus leaves of `id` among `changes`: 1 while present, 0 when not, by the events. */
const balance = (changes: readonly PresenceChange[], id = 'alice') =>
  changes.filter((c) => c.id === id).reduce((n, c) => n + (c.type === 'join' ? 1 : -1), 0);

/** Whether `changes` of each id alternate join, leave, join… starting with a join. */
const alternate = (changes: readonly PresenceChange[]) => {
  const last = new Map<string, string>();
  for (const c of changes) {
    if ((last.get(c.id) ?? 'leave') === c.type) return false;
    last.set(c.id, c.type);
  }
  return true;
};

/** The PresenceStore contract, run against memory and DynamoDB. */
export function presenceStoreContract(
  name: string,
  factory: () => Promise<PresenceFixture> | PresenceFixture,
  options: PresenceContractOptions = {},
): void {
  const trials = options.trials ?? 50;

  describe(`${name} (PresenceStore contract)`, () => {
    let store: PresenceStore;
    let committed: PresenceFixture['committed'];
    let stream: string;
    beforeEach(async () => {
      ({ store, committed } = await factory());
      stream = uid('stream');
    });

    it('writes each join and leave with its change, in order, and nothing for the rest', async () => {
      const [a, b] = [uid('c'), uid('c')];
      await store.join(stream, a, 'alice', { n: 1 }, T0); // join
      await store.join(stream, b, 'alice', { n: 2 }, T0); // a second session: nothing
      await store.join(stream, a, 'alice', { n: 3 }, T0); // info only: nothing
      await store.join(stream, b, 'bob', undefined, T0); // moves b: join bob
      await store.join(stream, a, 'carol', null, T0); // moves a, alice's last: leave, join
      await store.leave(stream, b, T0); // leave bob
      await store.leave(stream, b, T0); // not present: nothing
      await store.drop(a, T0, TTL); // a drop is no leave yet
      expect(await committed(stream)).toEqual([
        { stream, type: 'join', id: 'alice', info: '{"n":1}' },
        { stream, type: 'join', id: 'bob' },
        ...(await committed(stream)).slice(2, 4), // one transaction: no order between them
        { stream, type: 'leave', id: 'bob' },
      ]);
      expect((await committed(stream)).slice(2, 4)).toEqual(
        expect.arrayContaining([
          { stream, type: 'leave', id: 'alice' },
          { stream, type: 'join', id: 'carol', info: 'null' },
        ]),
      );
      expect(on(stream, await store.expire(T0 + TTL))).toEqual([{ stream, id: 'carol' }]);
      expect((await committed(stream)).at(-1)).toEqual({ stream, type: 'leave', id: 'carol' });
      expect(await committed(stream)).toHaveLength(6);
    });

    it('makes an id present on its first session only', async () => {
      const [a, b] = [uid('c'), uid('c')];
      expect(await store.join(stream, a, 'alice', { name: 'Alice' }, T0)).toEqual({
        joined: true,
      });
      expect(await store.join(stream, b, 'alice', { name: 'Alice 2' }, T0)).toEqual({
        joined: false,
      });
      expect(await store.members(stream, T0)).toEqual({
        total: 1,
        records: [{ id: 'alice', info: { name: 'Alice 2' } }],
      });
    });

    it('leaves only when the last session of the id leaves', async () => {
      const [a, b] = [uid('c'), uid('c')];
      await store.join(stream, a, 'alice', null, T0);
      await store.join(stream, b, 'alice', null, T0);
      expect(await store.leave(stream, a, T0)).toEqual({ id: 'alice' });
      expect((await store.members(stream, T0)).total).toBe(1);
      expect(await store.leave(stream, b, T0)).toEqual({ id: 'alice', left: 'alice' });
      expect(await store.members(stream, T0)).toEqual({ total: 0, records: [] });
      expect(await store.join(stream, a, 'alice', null, T0)).toEqual({ joined: true });
    });

    it('takes a repeated join of a connection as one session, with the latest info', async () => {
      const a = uid('c');
      await store.join(stream, a, 'alice', 1, T0);
      expect(await store.join(stream, a, 'alice', 2, T0)).toEqual({ joined: false });
      expect((await store.members(stream, T0)).records).toEqual([{ id: 'alice', info: 2 }]);
      expect(await store.join(stream, a, 'alice', undefined, T0)).toEqual({ joined: false });
      expect((await store.members(stream, T0)).records).toEqual([{ id: 'alice', info: undefined }]);
      expect(await store.leave(stream, a, T0)).toEqual({ id: 'alice', left: 'alice' });
    });

    it('ignores a leave of a connection that is not present, or leaves twice', async () => {
      const a = uid('c');
      expect(await store.leave(stream, a, T0)).toEqual({});
      await store.join(stream, a, 'alice', null, T0);
      expect(await store.leave(stream, a, T0)).toEqual({ id: 'alice', left: 'alice' });
      expect(await store.leave(stream, a, T0)).toEqual({});
      expect((await store.members(stream, T0)).total).toBe(0);
    });

    it('moves a connection that joins again with another id', async () => {
      const [a, b] = [uid('c'), uid('c')];
      await store.join(stream, a, 'alice', null, T0);
      await store.join(stream, b, 'bob', null, T0);
      expect(await store.join(stream, a, 'bob', null, T0)).toEqual({
        joined: false,
        left: 'alice',
      });
      expect(await store.members(stream, T0)).toEqual({
        total: 1,
        records: [{ id: 'bob', info: null }],
      });
      expect(await store.leave(stream, b, T0)).toEqual({ id: 'bob' });
      expect(await store.leave(stream, a, T0)).toEqual({ id: 'bob', left: 'bob' });
    });

    it('keeps presence per stream', async () => {
      const a = uid('c');
      const other = uid('stream');
      await store.join(stream, a, 'alice', null, T0);
      expect(await store.join(other, a, 'alice', null, T0)).toEqual({ joined: true });
      expect(await store.leave(stream, a, T0)).toEqual({ id: 'alice', left: 'alice' });
      expect((await store.members(other, T0)).total).toBe(1);
      expect((await store.drop(a, T0, TTL)).sort()).toEqual([other]);
    });

    it('keeps a dropped connection present for the ttl, then leaves', async () => {
      const a = uid('c');
      const t = T0 + 1_000;
      await store.join(stream, a, 'alice', null, t);
      expect(await store.drop(a, t, TTL)).toEqual([stream]);
      expect(on(stream, await store.expire(t + TTL - 1))).toEqual([]);
      expect((await store.members(stream, t + TTL - 1)).total).toBe(1);
      expect(on(stream, await store.expire(t + TTL))).toEqual([{ stream, id: 'alice' }]);
      expect((await store.members(stream, t + TTL)).total).toBe(0);
      expect(on(stream, await store.expire(t + TTL))).toEqual([]);
      expect(await store.drop(a, t + TTL, TTL)).toEqual([]);
    });

    it('does not leave for a dropped session when another session of the id stays', async () => {
      const [a, b] = [uid('c'), uid('c')];
      await store.join(stream, a, 'alice', null, T0);
      await store.join(stream, b, 'alice', null, T0);
      await store.drop(a, T0, TTL);
      expect(on(stream, await store.expire(T0 + TTL))).toEqual([]);
      expect((await store.members(stream, T0 + TTL)).total).toBe(1);
      await store.drop(b, T0 + TTL, TTL);
      expect(on(stream, await store.expire(T0 + 2 * TTL))).toEqual([{ stream, id: 'alice' }]);
    });

    it("takes a restored session's join as no join, and its old connection's expiry as no leave", async () => {
      const [old, restored] = [uid('c'), uid('c')];
      await store.join(stream, old, 'alice', { v: 1 }, T0);
      await store.drop(old, T0, TTL);
      expect(await store.join(stream, restored, 'alice', { v: 1 }, T0 + 5_000)).toEqual({
        joined: false,
      });
      expect(on(stream, await store.expire(T0 + TTL))).toEqual([]);
      expect(await store.members(stream, T0 + TTL)).toEqual({
        total: 1,
        records: [{ id: 'alice', info: { v: 1 } }],
      });
      expect(await store.leave(stream, restored, T0 + TTL)).toEqual({ id: 'alice', left: 'alice' });
    });

    it('never undoes a join made after the drop of the same connection', async () => {
      const a = uid('c');
      await store.join(stream, a, 'alice', null, T0);
      await store.drop(a, T0, TTL);
      expect(await store.join(stream, a, 'alice', null, T0 + 1)).toEqual({ joined: false });
      expect(on(stream, await store.expire(T0 + TTL))).toEqual([]);
      expect((await store.members(stream, T0 + TTL)).total).toBe(1);
      expect(await store.leave(stream, a, T0 + TTL)).toEqual({ id: 'alice', left: 'alice' });
    });

    it('expires only the buckets it is given', async () => {
      const a = uid('c');
      const mine = bucketOf(a, 8);
      const others = [0, 1, 2, 3, 4, 5, 6, 7].filter((b) => b !== mine);
      await store.join(stream, a, 'alice', null, T0);
      await store.drop(a, T0, TTL);
      expect(on(stream, await store.expire(T0 + TTL, others))).toEqual([]);
      expect(on(stream, await store.expire(T0 + TTL, [mine]))).toEqual([{ stream, id: 'alice' }]);
    });

    it('expires at most `limit` departures per call', async () => {
      const conns = [uid('c'), uid('c'), uid('c')];
      for (const [i, c] of conns.entries()) await store.join(stream, c, `id${i}`, null, T0);
      for (const c of conns) await store.drop(c, T0, TTL);
      const first = on(stream, await store.expire(T0 + TTL, undefined, 2));
      expect(first.length).toBeLessThanOrEqual(2);
      const rest = on(stream, await store.expire(T0 + TTL, undefined, 100));
      expect([...first, ...rest].map((l) => l.id).sort()).toEqual(['id0', 'id1', 'id2']);
    });

    it('counts every member exactly and caps the records, in id order', async () => {
      const ids = ['g', 'c', 'a', 'f', 'b', 'e', 'd'];
      await Promise.all(ids.map((id) => store.join(stream, uid('c'), id, { id }, T0)));
      const page = await store.members(stream, T0, 3);
      expect(page.total).toBe(7);
      expect(page.records).toEqual(['a', 'b', 'c'].map((id) => ({ id, info: { id } })));
      expect((await store.members(stream, T0)).records).toHaveLength(7);
      expect(await store.members(uid('stream'), T0)).toEqual({ total: 0, records: [] });
      expect(await store.members(uid('stream'), T0, 0)).toEqual({ total: 0, records: [] });
    });

    it('counts members past the records exactly while many ids join and leave at once', async () => {
      const conns = Array.from({ length: 40 }, (_, i) => ({ c: uid('c'), id: `id${i}` }));
      await Promise.all(conns.map(({ c, id }) => store.join(stream, c, id, null, T0)));
      // A second session of some ids, and the leave of others' only session, at once.
      await Promise.all([
        ...conns.slice(0, 10).map(({ id }) => store.join(stream, uid('c'), id, null, T0)),
        ...conns.slice(25).map(({ c }) => store.leave(stream, c, T0)),
      ]);
      for (const limit of [0, 3, 100]) {
        const page = await store.members(stream, T0, limit);
        expect({ limit, total: page.total, records: page.records.length }).toEqual({
          limit,
          total: 25,
          records: Math.min(limit, 25),
        });
      }
    });

    it('counts an id once when a join takes the place of its expired member', async () => {
      await store.join(stream, uid('c'), 'alice', null, T0);
      // Past every item's safety-net TTL: the member is expired, not yet deleted.
      const later = T0 + 24 * 3600 * 1000;
      expect((await store.members(stream, later)).total).toBeLessThanOrEqual(1);
      await store.join(stream, uid('c'), 'alice', null, later);
      await store.join(stream, uid('c'), 'bob', null, later);
      for (const limit of [0, 1, 100]) {
        expect({ limit, total: (await store.members(stream, later, limit)).total }).toEqual({
          limit,
          total: 2,
        });
      }
    });

    it('refuses an id or info over its limit, and an empty id', async () => {
      const a = uid('c');
      const longId = 'é'.repeat(MAX_PRESENCE_ID_BYTES / 2 + 1);
      await expect(store.join(stream, a, longId, null, T0)).rejects.toBeInstanceOf(
        LimitExceededError,
      );
      const bigInfo = 'x'.repeat(MAX_PRESENCE_INFO_BYTES);
      await expect(store.join(stream, a, 'alice', bigInfo, T0)).rejects.toBeInstanceOf(
        LimitExceededError,
      );
      await expect(store.join(stream, a, '', null, T0)).rejects.toBeInstanceOf(ProtocolError);
      const maxId = 'é'.repeat(MAX_PRESENCE_ID_BYTES / 2);
      const maxInfo = 'x'.repeat(MAX_PRESENCE_INFO_BYTES - 2);
      expect(await store.join(stream, a, maxId, maxInfo, T0)).toEqual({ joined: true });
      expect((await store.members(stream, T0)).records).toEqual([{ id: maxId, info: maxInfo }]);
    });

    /**
     * The stream's members as a read past its records counts them (a large stream's `total`):
     * two probe ids join, so that a read of limit 0 cannot reach the end, then leave again.
     */
    async function countedPastRecords(s: string, nowMs: number): Promise<number> {
      const probes = [uid('probe'), uid('probe')];
      for (const p of probes) await store.join(s, p, p, null, nowMs);
      const { total } = await store.members(s, nowMs, 0);
      for (const p of probes) await store.leave(s, p, nowMs);
      return total - probes.length;
    }

    it(`ends concurrent joins and leaves of one id with events that match (${trials} interleavings)`, async () => {
      for (let trial = 0; trial < trials; trial++) {
        const s = `${stream}-${trial}`;
        const conns = Array.from({ length: 3 + (trial % 3) }, () => uid('c'));
        let events = 0;
        const lastJoined = await Promise.all(
          conns.map(async (c) => {
            let joined = false;
            const steps = 1 + Math.floor(Math.random() * 4);
            for (let i = 0; i < steps; i++) {
              await jitter();
              if (Math.random() < 0.6) {
                if ((await store.join(s, c, 'alice', { c }, T0)).joined) events++;
                joined = true;
              } else {
                if ((await store.leave(s, c, T0)).left !== undefined) events--;
                joined = false;
              }
            }
            return joined;
          }),
        );
        const present = lastJoined.some(Boolean) ? 1 : 0;
        expect({ trial, total: (await store.members(s, T0)).total }).toEqual({
          trial,
          total: present,
        });
        expect({ trial, events }).toEqual({ trial, events: present });
        const written = await committed(s);
        expect({ trial, balance: balance(written), alternate: alternate(written) }).toEqual({
          trial,
          balance: present,
          alternate: true,
        });
        expect({ trial, counted: await countedPastRecords(s, T0) }).toEqual({
          trial,
          counted: present,
        });
        await Promise.all(conns.map((c) => store.leave(s, c, T0)));
      }
    }, 120_000);

    it(`ends concurrent restores, expiries and leaves with events that match (${Math.ceil(trials / 2)} interleavings)`, async () => {
      for (let trial = 0; trial < Math.ceil(trials / 2); trial++) {
        const s = `${stream}-${trial}`;
        const [old, other, restored] = [uid('c'), uid('c'), uid('c')];
        let events = 0;
        if ((await store.join(s, old, 'alice', null, T0)).joined) events++;
        const withOther = trial % 2 === 1;
        if (withOther && (await store.join(s, other, 'alice', null, T0)).joined) events++;
        await store.drop(old, T0, TTL);
        const restore = Math.random() < 0.7;
        const expiries = Array.from({ length: 2 }, async () => {
          await jitter();
          for (const l of on(s, await store.expire(T0 + TTL))) if (l.id === 'alice') events--;
        });
        const others = [
          (async () => {
            await jitter();
            if (restore && (await store.join(s, restored, 'alice', null, T0 + TTL)).joined) {
              events++;
            }
          })(),
          (async () => {
            await jitter();
            if (withOther && (await store.leave(s, other, T0 + TTL)).left) events--;
          })(),
        ];
        await Promise.all([...expiries, ...others]);
        const present = restore ? 1 : 0;
        expect({ trial, total: (await store.members(s, T0 + TTL)).total }).toEqual({
          trial,
          total: present,
        });
        expect({ trial, events }).toEqual({ trial, events: present });
        const written = await committed(s);
        expect({ trial, balance: balance(written), alternate: alternate(written) }).toEqual({
          trial,
          balance: present,
          alternate: true,
        });
        expect({ trial, counted: await countedPastRecords(s, T0 + TTL) }).toEqual({
          trial,
          counted: present,
        });
        await store.leave(s, restored, T0 + TTL);
      }
    }, 120_000);
  });
}
