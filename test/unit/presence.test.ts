import { describe, expect, it } from 'vitest';
import {
  checkPresence,
  MAX_PRESENCE_ID_BYTES,
  MAX_PRESENCE_INFO_BYTES,
  type PresenceChange,
  type PresenceRefusalReason,
} from '../../lib/core';
import { MemoryPresenceStore } from '../../lib/testing';
import { presenceStoreContract } from '../contract/presence';

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
