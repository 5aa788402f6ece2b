import { describe, expect, it } from 'vitest';
import {
  BroadcastEvent,
  hasBroadcastKey,
  LimitExceededError,
  MAX_BROADCAST_BODY_BYTES,
  MAX_BROADCAST_DATA_BYTES,
  MAX_BROADCAST_ITEMS,
  MAX_STREAM_BYTES,
  MessageFormatError,
  parseBroadcastRequest,
  RemoteCommandEvent,
} from '../../../../lib/core';
import { COMMANDS_KEY } from '../../../../lib/realtime/broadcasts/events';

describe('parseBroadcastRequest (AnyCable broadcast API body)', () => {
  it('reads one broadcast, or an array of broadcasts and commands, in order', () => {
    expect(parseBroadcastRequest('{"stream":"chat/1","data":"{\\"a\\":1}"}')).toEqual([
      { kind: 'broadcast', broadcast: { stream: 'chat/1', data: '{"a":1}' } },
    ]);
    expect(
      parseBroadcastRequest(
        JSON.stringify([
          { stream: 'a', data: 'x' },
          { command: 'disconnect', payload: { identity: 'u1' } },
        ]),
      ),
    ).toEqual([
      { kind: 'broadcast', broadcast: { stream: 'a', data: 'x' } },
      { kind: 'command', command: { command: 'disconnect', payload: '{"identity":"u1"}' } },
    ]);
  });

  it.each([
    ['', /empty body/],
    ['not json', /not JSON/],
    ['[]', /empty array/],
    ['42', /not an object/],
    ['{"data":"x"}', /"stream" must be a non-empty string/],
    ['{"stream":"s","data":{"a":1}}', /"data" must be a string/],
    ['[{"stream":"s","data":"x"},{"stream":""}]', /at index 1/],
  ])('rejects %j with a MessageFormatError saying what is wrong', (body, message) => {
    let error: unknown;
    try {
      parseBroadcastRequest(body);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MessageFormatError);
    expect((error as Error).message).toMatch(message);
  });
});

describe('hasBroadcastKey', () => {
  it('accepts exactly "Bearer <key>"', () => {
    expect(hasBroadcastKey('Bearer s3cret', 's3cret')).toBe(true);
    expect(hasBroadcastKey('bearer s3cret', 's3cret')).toBe(true);
  });

  it('refuses a missing, wrong or partial key, and any key when none is configured', () => {
    expect(hasBroadcastKey(undefined, 's3cret')).toBe(false);
    expect(hasBroadcastKey('Bearer s3cre', 's3cret')).toBe(false);
    expect(hasBroadcastKey('s3cret', 's3cret')).toBe(false);
    expect(hasBroadcastKey('Bearer ', '')).toBe(false);
  });

  it('accepts the current and, during a rotation, the previous key; never an unset one', () => {
    const keys = ['new-key', 'old-key'];
    expect(hasBroadcastKey('Bearer new-key', keys)).toBe(true);
    expect(hasBroadcastKey('Bearer old-key', keys)).toBe(true);
    expect(hasBroadcastKey('Bearer other', keys)).toBe(false);
    // After the rotation the previous key is unset: the old one is refused.
    expect(hasBroadcastKey('Bearer old-key', ['new-key', undefined])).toBe(false);
    expect(hasBroadcastKey('Bearer x', [undefined, ''])).toBe(false);
  });
});

describe('built-in broadcast events', () => {
  const keyOf = (command: string, payload: object | string) =>
    RemoteCommandEvent.keyOf({
      command,
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });

  it('keys a broadcast by its stream, and a remote unsubscribe by the same stream', () => {
    expect(BroadcastEvent.keyOf({ stream: 'chat/9', data: '' })).toBe('chat/9');
    // One outbox partition and one message group with the stream's broadcasts: handled in
    // commit order with them, stream-wide or for one identity.
    expect(keyOf('unsubscribe', { stream: 'chat/9' })).toBe('chat/9');
    expect(keyOf('unsubscribe', { stream: 'chat/9', identity: 'alice' })).toBe('chat/9');
    const longest = 's'.repeat(MAX_STREAM_BYTES);
    expect(keyOf('unsubscribe', { stream: longest })).toBe(longest);
    // A name no broadcast can have (over the stream limit) has nothing to be ordered with.
    expect(keyOf('unsubscribe', { stream: 's'.repeat(MAX_STREAM_BYTES + 1) })).toBe(
      `${COMMANDS_KEY}#${'s'.repeat(MAX_STREAM_BYTES + 1)}`,
    );
    expect(keyOf('unsubscribe', { stream: 's'.repeat(3000) })).toMatch(
      /^\$commands#~sha256:[0-9a-f]{64}$/,
    );
    expect(keyOf('unsubscribe', {})).toBe(COMMANDS_KEY);
  });

  it('keys a remote disconnect by the identity or connection it acts on, never by a stream', () => {
    // Commands on one target share a partition (their order holds); other targets do not
    // wait behind a command that keeps failing.
    expect(keyOf('disconnect', '{"identifier":"alice","reconnect":false}')).toBe(
      `${COMMANDS_KEY}#alice`,
    );
    expect(keyOf('disconnect', { identity: 'bob' })).toBe(`${COMMANDS_KEY}#bob`);
    expect(keyOf('disconnect', { identity: 'bob', stream: 'chat/9' })).toBe(`${COMMANDS_KEY}#bob`);
    expect(keyOf('disconnect', { connectionId: 'c-1', identity: 'bob' })).toBe(
      `${COMMANDS_KEY}#c-1`,
    );
    // A target longer than a key may be: its hash.
    expect(keyOf('disconnect', { identity: 'i'.repeat(3000) })).toMatch(
      /^\$commands#~sha256:[0-9a-f]{64}$/,
    );
    // Nothing named (or not JSON): the shared partition.
    expect(keyOf('disconnect', {})).toBe(COMMANDS_KEY);
    expect(keyOf('disconnect', 'not json')).toBe(COMMANDS_KEY);
    expect(keyOf('unsubscribe', 'not json')).toBe(COMMANDS_KEY);
  });
});

describe('parseBroadcastRequest limits', () => {
  it(`takes ${MAX_BROADCAST_ITEMS} items and refuses one more, naming the count and the limit`, () => {
    const items = (n: number) =>
      JSON.stringify(Array.from({ length: n }, (_, i) => ({ stream: `s${i}`, data: '1' })));
    expect(parseBroadcastRequest(items(MAX_BROADCAST_ITEMS))).toHaveLength(MAX_BROADCAST_ITEMS);
    expect(() => parseBroadcastRequest(items(MAX_BROADCAST_ITEMS + 1))).toThrow(
      new MessageFormatError(
        `${MAX_BROADCAST_ITEMS + 1} items, the limit is ${MAX_BROADCAST_ITEMS} per request: send the rest in more requests`,
      ),
    );
  });

  it(`refuses a body over ${MAX_BROADCAST_BODY_BYTES} bytes as a payload too large`, () => {
    const body = JSON.stringify({ stream: 'a', data: 'x'.repeat(MAX_BROADCAST_BODY_BYTES) });
    const error = (() => {
      try {
        parseBroadcastRequest(body);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(LimitExceededError);
    expect(error).toMatchObject({ kind: 'payload', limit: MAX_BROADCAST_BODY_BYTES });
    expect((error as Error).message).toContain(`the limit is ${MAX_BROADCAST_BODY_BYTES}`);
  });

  it(`refuses data over ${MAX_BROADCAST_DATA_BYTES} bytes, also once re-encoded for clients`, () => {
    const big = JSON.stringify({ stream: 'a', data: 'x'.repeat(MAX_BROADCAST_DATA_BYTES + 1) });
    expect(() => parseBroadcastRequest(big)).toThrow(
      expect.objectContaining({ kind: 'payload', limit: MAX_BROADCAST_DATA_BYTES }),
    );
    // Not JSON, so clients get it as a JSON string: every control character becomes \u00XX.
    const expands = JSON.stringify({ stream: 'a', data: '\u0001'.repeat(20_000) });
    expect(() => parseBroadcastRequest(expands)).toThrow(LimitExceededError);
    const fits = JSON.stringify({ stream: 'a', data: 'x'.repeat(MAX_BROADCAST_DATA_BYTES - 2) });
    expect(parseBroadcastRequest(fits)).toHaveLength(1);
  });

  it(`refuses a stream name over ${MAX_STREAM_BYTES} bytes (UTF-8) as a bad key`, () => {
    const body = JSON.stringify([
      { stream: 'ok', data: 'x' },
      { stream: 'ü'.repeat(MAX_STREAM_BYTES / 2 + 1), data: 'x' },
    ]);
    expect(() => parseBroadcastRequest(body)).toThrow(
      expect.objectContaining({
        kind: 'key',
        limit: MAX_STREAM_BYTES,
        message: expect.stringContaining(`at index 1: "stream" is 258 bytes, the limit is 256`),
      }),
    );
  });

  it(`refuses a remote command over ${MAX_BROADCAST_DATA_BYTES} bytes`, () => {
    const body = JSON.stringify({
      command: 'disconnect',
      payload: { identity: 'x'.repeat(MAX_BROADCAST_DATA_BYTES) },
    });
    expect(() => parseBroadcastRequest(body)).toThrow(
      expect.objectContaining({ kind: 'payload', what: 'command' }),
    );
  });

  it('accepts stream names with spaces and non-ASCII characters', () => {
    const body = JSON.stringify({ stream: 'chat room/café 🎉', data: '1' });
    expect(parseBroadcastRequest(body)).toEqual([
      { kind: 'broadcast', broadcast: { stream: 'chat room/café 🎉', data: '1' } },
    ]);
  });
});
