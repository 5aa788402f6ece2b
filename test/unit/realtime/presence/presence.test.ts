import { describe, expect, it } from 'vitest';
import {
  AvroCodec,
  checkPresence,
  LimitExceededError,
  MAX_PRESENCE_ID_BYTES,
  MAX_PRESENCE_INFO_BYTES,
  MessageFormatError,
  PRESENCE_TOPIC,
  type PresenceChange,
  PresenceEvent,
  type PresenceRefusalReason,
  presenceEventOf,
  presenceMessage,
} from '../../../../lib/core';
import { broadcastFrame } from '../../../../lib/realtime/protocol';
import { MemoryPresenceStore, MemorySchemaRegistry } from '../../../../lib/testing';
import { presenceStoreContract } from '../../../contract/presence';

presenceStoreContract('MemoryPresenceStore', () => {
  const log: PresenceChange[] = [];
  return {
    store: new MemoryPresenceStore({ onChange: (changes) => log.push(...changes) }),
    committed: async (stream) => log.filter((c) => c.stream === stream),
  };
});

/** The reason `checkPresence` refuses with, or `ok`. */
function verdict(id: unknown, info: unknown): PresenceRefusalReason | 'ok' {
  const check = checkPresence(id, info);
  return check.ok ? 'ok' : check.refusal.reason;
}

describe('checkPresence', () => {
  it('accepts an id of at most 128 bytes (UTF-8) and any JSON info of at most 1 KB', () => {
    expect(verdict('a'.repeat(MAX_PRESENCE_ID_BYTES), { name: 'x' })).toBe('ok');
    expect(verdict('é'.repeat(MAX_PRESENCE_ID_BYTES / 2), null)).toBe('ok');
    expect(verdict('alice', 'x'.repeat(MAX_PRESENCE_INFO_BYTES - 2))).toBe('ok');
    expect(verdict('alice', undefined)).toBe('ok');
    expect(checkPresence('alice', { a: [1, 'b'] })).toEqual({
      ok: true,
      id: 'alice',
      infoJson: '{"a":[1,"b"]}',
    });
    expect(checkPresence('alice', undefined)).toEqual({
      ok: true,
      id: 'alice',
      infoJson: undefined,
    });
  });

  it('refuses an id over 128 bytes, counted in UTF-8', () => {
    expect(verdict('a'.repeat(MAX_PRESENCE_ID_BYTES + 1), null)).toBe('id_too_long');
    expect(verdict('é'.repeat(MAX_PRESENCE_ID_BYTES / 2 + 1), null)).toBe('id_too_long');
    const check = checkPresence('é'.repeat(65), null);
    expect(check.ok ? '' : check.refusal.message).toBe(
      'presence id is 130 bytes, the limit is 128 (UTF-8)',
    );
  });

  it('refuses an empty or non-string id', () => {
    expect(verdict('', null)).toBe('no_id');
    expect(verdict(42, null)).toBe('no_id');
    expect(verdict(undefined, null)).toBe('no_id');
  });

  it('refuses info over 1 KB as JSON, counted in UTF-8', () => {
    expect(verdict('alice', 'x'.repeat(MAX_PRESENCE_INFO_BYTES - 1))).toBe('info_too_large');
    expect(verdict('alice', 'é'.repeat(MAX_PRESENCE_INFO_BYTES / 2))).toBe('info_too_large');
    const check = checkPresence('alice', { big: 'x'.repeat(2000) });
    expect(check.ok ? '' : check.refusal.message).toBe(
      'presence info is 2010 bytes as JSON, the limit is 1024',
    );
  });

  it('refuses info that is not JSON', () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(verdict('alice', circular)).toBe('info_not_json');
    expect(verdict('alice', 1n)).toBe('info_not_json');
    expect(verdict('alice', () => 1)).toBe('info_not_json');
  });
});

describe('PresenceEvent: a change as services consume it and subscribers get it', () => {
  const registry = () => new MemorySchemaRegistry();

  it('round-trips a join with info and a leave through Avro, keyed by the stream', async () => {
    const codec = new AvroCodec(registry());
    const join = presenceEventOf({ stream: 'room', type: 'join', id: 'alice', info: '{"n":1}' });
    const leave = presenceEventOf({ stream: 'room', type: 'leave', id: 'alice' });
    expect(leave).toEqual({ stream: 'room', type: 'leave', id: 'alice', info: null });
    for (const value of [join, leave]) {
      expect(await codec.decode(await codec.encode(PresenceEvent, value), PresenceEvent)).toEqual(
        value,
      );
    }
    expect(PresenceEvent.keyOf(join)).toBe('room');
    expect(PresenceEvent.topic).toBe(PRESENCE_TOPIC);
  });

  it('becomes a transient presence message whose frame carries each subscriber its identifier', () => {
    const msg = presenceMessage(
      presenceEventOf({ stream: 'room', type: 'join', id: 'alice', info: '{"n":1}' }),
    );
    expect(msg).toEqual({
      stream: 'room',
      data: '{"type":"join","id":"alice","info":{"n":1}}',
      meta: { transient: true, presence: true },
    });
    expect(JSON.parse(broadcastFrame('id-1', msg!))).toEqual({
      type: 'presence',
      identifier: 'id-1',
      message: { type: 'join', id: 'alice', info: { n: 1 } },
    });
    const leave = presenceMessage(presenceEventOf({ stream: 'room', type: 'leave', id: 'alice' }));
    expect(JSON.parse(broadcastFrame('id-2', leave!))).toEqual({
      type: 'presence',
      identifier: 'id-2',
      message: { type: 'leave', id: 'alice' },
    });
  });

  it('refuses what no subscriber could get: an unknown kind, info that is not JSON or too large', () => {
    const base = { stream: 'room', id: 'alice', info: null };
    expect(presenceMessage({ ...base, type: 'dance' })).toBeUndefined();
    expect(presenceMessage({ ...base, type: 'join', info: '{not json' })).toBeUndefined();
    expect(
      presenceMessage({ ...base, type: 'join', info: JSON.stringify('x'.repeat(2000)) }),
    ).toBeUndefined();
    expect(() =>
      PresenceEvent.check({ ...base, type: 'join', info: JSON.stringify('x'.repeat(2000)) }),
    ).toThrow(LimitExceededError);
    expect(() => PresenceEvent.check({ ...base, type: 'join', info: '{' })).toThrow(
      MessageFormatError,
    );
  });
});
