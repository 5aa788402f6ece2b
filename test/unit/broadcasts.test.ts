import { describe, expect, it } from 'vitest';
import {
  BroadcastEvent,
  COMMANDS_KEY,
  hasBroadcastKey,
  MessageFormatError,
  parseBroadcastRequest,
  RemoteCommandEvent,
} from '../../lib';

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
});

describe('built-in broadcast events', () => {
  it('keys a broadcast by its stream and every command by one partition', () => {
    expect(BroadcastEvent.keyOf({ stream: 'chat/9', data: '' })).toBe('chat/9');
    expect(RemoteCommandEvent.keyOf({ command: 'disconnect', payload: '{}' })).toBe(COMMANDS_KEY);
  });
});
