import { describe, expect, it } from 'vitest';
import {
  defaultBrokerConfig,
  MAX_IDENTIFIER_BYTES,
  MAX_STREAM_BYTES,
  signStreamName,
} from '../../../lib/core';
import { resolveStream, type StreamsConfig } from '../../../lib/realtime/auth/streams';
import { invalidHistoryRequest } from '../../../lib/realtime/gateway/history';
import { readPingInterval } from '../../../lib/realtime/keepalive/ping-interval';
import {
  checkCommand,
  EXT_PROTOCOL,
  PLAIN_PROTOCOL,
  parseClientFrame,
} from '../../../lib/realtime/protocol';
import { EXT, gatewayHarness, pubsub, STREAMS_SECRET } from '../../helpers/gateway';

const streams: StreamsConfig = {
  streamsSecret: STREAMS_SECRET,
  publicStreams: true,
  publicStreamPrefix: '',
  whisperOnSigned: false,
};

describe('resolveStream', () => {
  it('resolves a public stream, whispers allowed', () => {
    expect(resolveStream(pubsub('chat'), streams)).toEqual({
      ok: true,
      stream: 'chat',
      whisper: true,
    });
  });

  it('resolves a signed stream, whispers as configured', () => {
    const identifier = JSON.stringify({
      channel: '$pubsub',
      signed_stream_name: signStreamName('secret-room', STREAMS_SECRET),
    });
    expect(resolveStream(identifier, streams)).toEqual({
      ok: true,
      stream: 'secret-room',
      whisper: false,
    });
    expect(resolveStream(identifier, { ...streams, whisperOnSigned: true })).toMatchObject({
      whisper: true,
    });
  });

  it.each([
    [
      'identifier_too_long',
      JSON.stringify({
        channel: '$pubsub',
        stream_name: 'a',
        pad: 'x'.repeat(MAX_IDENTIFIER_BYTES),
      }),
      /^identifier is \d+ bytes, the limit is 760 \(UTF-8\)$/,
    ],
    ['not_json', 'chat', /^identifier is not JSON$/],
    ['not_object', '"chat"', /^identifier is not a JSON object$/],
    [
      'unknown_channel',
      JSON.stringify({ channel: 'ChatChannel' }),
      /^unknown channel: ChatChannel, expected \$pubsub$/,
    ],
    [
      'unknown_keys',
      JSON.stringify({ channel: '$pubsub', stream_name: 'chat', x: 1 }),
      /^identifier has keys other than channel, stream_name and signed_stream_name: "x"$/,
    ],
    [
      'signature',
      JSON.stringify({ channel: '$pubsub', signed_stream_name: signStreamName('x', 'forged') }),
      /^signed stream name does not verify$/,
    ],
    ['no_stream', JSON.stringify({ channel: '$pubsub' }), /^identifier names no stream_name/],
    [
      'stream_too_long',
      pubsub('s'.repeat(MAX_STREAM_BYTES + 1)),
      /^stream name is 257 bytes, the limit is 256 \(UTF-8\)$/,
    ],
  ])('refuses with %s', (reason, identifier, message) => {
    const resolved = resolveStream(identifier, streams);
    expect(resolved).toEqual({ ok: false, refusal: { reason, message: expect.any(String) } });
    expect(resolved.ok ? '' : resolved.refusal.message).toMatch(message);
  });

  it('refuses a public stream with public_disabled when public streams are off', () => {
    expect(resolveStream(pubsub('chat'), { ...streams, publicStreams: false })).toEqual({
      ok: false,
      refusal: { reason: 'public_disabled', message: 'public streams are disabled' },
    });
  });
});

describe('parseClientFrame', () => {
  it('parses a JSON object with a command, keeping a string identifier', () => {
    const raw = JSON.stringify({ command: 'whisper', identifier: 'i', data: { a: 1 } });
    expect(parseClientFrame(raw, 1000)).toEqual({
      ok: true,
      frame: { command: 'whisper', identifier: 'i', data: { a: 1 }, history: undefined },
    });
    expect(parseClientFrame('{"command":"pong","identifier":7}', 1000)).toMatchObject({
      ok: true,
      frame: { command: 'pong', identifier: undefined },
    });
  });

  it('refuses a frame over the limit with too_large, counting UTF-8 bytes', () => {
    expect(parseClientFrame(JSON.stringify({ command: 'é'.repeat(10) }), 20)).toEqual({
      ok: false,
      refusal: { reason: 'too_large', message: 'frame of 34 bytes is over the limit of 20' },
    });
  });

  it.each(['nope', '[]', 'null', '"subscribe"', '{"command":'])(
    'refuses %j with not_json_object',
    (raw) => {
      const parsed = parseClientFrame(raw, 1000);
      expect(parsed).toMatchObject({
        ok: false,
        refusal: { reason: 'not_json_object', message: 'frame is not a JSON object' },
      });
      expect(parsed.ok ? undefined : parsed.refusal.cause).toBeInstanceOf(Error);
    },
  );

  it.each(['{}', '{"command":""}', '{"command":1}'])('refuses %j with no_command', (raw) => {
    expect(parseClientFrame(raw, 1000)).toEqual({
      ok: false,
      refusal: { reason: 'no_command', message: 'frame has no command' },
    });
  });
});

describe('checkCommand', () => {
  const frame = (command: string, identifier?: string) => ({ command, identifier });

  it('accepts the channel commands, history only with the extended protocol', () => {
    expect(checkCommand(frame('history', 'i'), EXT_PROTOCOL)).toEqual({
      ok: true,
      command: 'history',
      identifier: 'i',
    });
    expect(checkCommand(frame('history', 'i'), PLAIN_PROTOCOL)).toEqual({
      ok: false,
      refusal: {
        reason: 'unknown_command',
        message:
          'unknown command: history, expected one of subscribe, unsubscribe, message, whisper, join, leave, presence',
      },
    });
    for (const command of ['join', 'leave', 'presence']) {
      for (const protocol of [EXT_PROTOCOL, PLAIN_PROTOCOL]) {
        expect(checkCommand(frame(command, 'i'), protocol)).toEqual({
          ok: true,
          command,
          identifier: 'i',
        });
      }
    }
  });

  it('refuses an unknown command with unknown_command, before a missing identifier', () => {
    expect(checkCommand(frame('dance'), EXT_PROTOCOL)).toEqual({
      ok: false,
      refusal: {
        reason: 'unknown_command',
        message:
          'unknown command: dance, expected one of subscribe, unsubscribe, message, whisper, history, join, leave, presence',
      },
    });
  });

  it('refuses a command without identifier with no_identifier', () => {
    expect(checkCommand(frame('subscribe'), EXT_PROTOCOL)).toEqual({
      ok: false,
      refusal: { reason: 'no_identifier', message: 'frame has no identifier' },
    });
  });
});

describe('readPingInterval', () => {
  it('reads an allowed interval, and none when absent or empty', () => {
    expect(readPingInterval('30')).toEqual({ ok: true, seconds: 30 });
    expect(readPingInterval(undefined)).toEqual({ ok: true, seconds: undefined });
    expect(readPingInterval('')).toEqual({ ok: true, seconds: undefined });
  });

  it.each([
    ['abc', 'not_integer'],
    ['2.5', 'not_integer'],
    ['-5', 'not_integer'],
    ['1e3', 'not_integer'],
    ['0', 'out_of_range'],
    ['541', 'out_of_range'],
  ])('refuses %j with %s', (pi, reason) => {
    expect(readPingInterval(pi)).toEqual({
      ok: false,
      refusal: {
        reason,
        message: `pi must be an integer number of seconds from 1 to 540, got: ${JSON.stringify(pi)}`,
      },
    });
  });
});

describe('invalidHistoryRequest', () => {
  const check = (request: object, position?: unknown) =>
    invalidHistoryRequest(request, position === undefined ? {} : { s: position }, ['s']);

  it('accepts a request with since and a well-formed position', () => {
    expect(check({ since: 10 }, { epoch: 'e', offset: 0 })).toBeUndefined();
  });

  it.each([
    ['since', { since: -1 }, undefined, 'since must be a number of seconds >= 0, got: -1'],
    ['position', {}, 'e', 'a stream position must be an object'],
    ['epoch', {}, { epoch: '', offset: 1 }, 'epoch must be a non-empty string, got: ""'],
    ['offset', {}, { epoch: 'e', offset: 1.5 }, 'offset must be an integer >= 0, got: 1.5'],
  ])('refuses with %s', (reason, request, position, message) => {
    expect(check(request, position)).toEqual({ reason, message });
  });
});

describe('composeRealtime', () => {
  it("finishes the session of a connection a fan-out finds gone (410) in the given cache, and only that one's", async () => {
    const t = gatewayHarness({ config: { allowAnonymous: true, publicStreams: true } });
    const { clock, sessions, api, store, broker, gateway } = t;
    for (const c of ['gone', 'live']) {
      await gateway.connect({ connectionId: c, query: {}, protocols: EXT });
      await gateway.welcome(c);
      await gateway.receive(c, JSON.stringify({ command: 'subscribe', identifier: pubsub('s') }));
    }
    clock.advance(10_000); // past the grace of a connection still in $connect
    api.markGone('gone');

    await broker.handleBroadcast({ stream: 's', data: '"hi"' });

    expect(await store.getConnection('gone')).toBeUndefined();
    expect(await sessions.restoreSession('sid-1')).not.toBeNull(); // kept for a restore
    clock.advanceSeconds(defaultBrokerConfig().sessionsTtl + 1);
    expect(await sessions.restoreSession('sid-1')).toBeNull();
    expect(await sessions.restoreSession('sid-2')).not.toBeNull();
  });
});
