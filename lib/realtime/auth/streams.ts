import { MAX_IDENTIFIER_BYTES, MAX_STREAM_BYTES, utf8Bytes } from '../../kernel/limits.js';
import type { CommandsConfig } from '../gateway/settings.js';
import { PUBSUB_CHANNEL, type Refusal } from '../protocol.js';
import type { AuthConfig } from './settings.js';
import { verifySignedStreamName } from './tokens.js';

/** The settings stream resolution reads. */
export type StreamsConfig = Pick<
  AuthConfig,
  'streamsSecret' | 'streamsPreviousSecret' | 'publicStreams' | 'publicStreamPrefix'
> &
  Pick<CommandsConfig, 'whisperOnSigned'>;

/** Why a `$pubsub` identifier names no stream a client may subscribe to. */
export type StreamRefusalReason =
  | 'identifier_too_long'
  | 'not_json'
  | 'not_object'
  | 'unknown_channel'
  | 'unknown_keys'
  | 'signature'
  | 'public_disabled'
  | 'not_public'
  | 'no_stream'
  | 'stream_too_long';

/** A refused identifier: its `reason` code and the `message` that is logged. */
export type StreamRefusal = Refusal<StreamRefusalReason>;

/** The stream of an identifier and whether whispers are allowed on it, or why it is refused. */
export type StreamResolution =
  | { readonly ok: true; readonly stream: string; readonly whisper: boolean }
  | { readonly ok: false; readonly refusal: StreamRefusal };

/**
 * The stream of a `$pubsub` identifier, or why it is refused. The identifier and the
 * stream become the subscription's sort key: each has a limit
 * ({@link MAX_IDENTIFIER_BYTES}, {@link MAX_STREAM_BYTES}).
 */
export function resolveStream(identifier: string, config: StreamsConfig): StreamResolution {
  const resolved = streamOf(identifier, config);
  if (!resolved.ok) return resolved;
  const bytes = utf8Bytes(resolved.stream);
  if (bytes > MAX_STREAM_BYTES) {
    return refuse(
      'stream_too_long',
      `stream name is ${bytes} bytes, the limit is ${MAX_STREAM_BYTES} (UTF-8)`,
    );
  }
  return resolved;
}

/**
 * The stream a `$pubsub` identifier names: a verified `signed_stream_name` (whispers as
 * configured), else a public `stream_name` when public streams are enabled and the name starts
 * with the public prefix (whispers allowed).
 */
export function streamOf(identifier: string, config: StreamsConfig): StreamResolution {
  const idBytes = utf8Bytes(identifier);
  if (idBytes > MAX_IDENTIFIER_BYTES) {
    return refuse(
      'identifier_too_long',
      `identifier is ${idBytes} bytes, the limit is ${MAX_IDENTIFIER_BYTES} (UTF-8)`,
    );
  }
  let params: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(identifier);
    if (typeof parsed !== 'object' || parsed === null) {
      return refuse('not_object', 'identifier is not a JSON object');
    }
    params = parsed as Record<string, unknown>;
  } catch {
    return refuse('not_json', 'identifier is not JSON');
  }
  if (params.channel !== PUBSUB_CHANNEL) {
    return refuse(
      'unknown_channel',
      `unknown channel: ${String(params.channel)}, expected ${PUBSUB_CHANNEL}`,
    );
  }
  // Any other key would make another identifier for the same stream: a second, paid copy of
  // every broadcast on one connection.
  const unknown = Object.keys(params).filter((k) => !PUBSUB_KEYS.has(k));
  if (unknown.length > 0) {
    return refuse(
      'unknown_keys',
      `identifier has keys other than channel, stream_name and signed_stream_name: ${unknown
        .slice(0, 3)
        .map((k) => JSON.stringify(k.slice(0, 40)))
        .join(', ')}${unknown.length > 3 ? ', …' : ''}`,
    );
  }
  if (typeof params.signed_stream_name === 'string') {
    const stream = verifySignedStreamName(params.signed_stream_name, [
      config.streamsSecret,
      config.streamsPreviousSecret,
    ]);
    if (!stream) return refuse('signature', 'signed stream name does not verify');
    return { ok: true, stream, whisper: config.whisperOnSigned };
  }
  if (typeof params.stream_name === 'string' && params.stream_name) {
    if (!config.publicStreams) return refuse('public_disabled', 'public streams are disabled');
    // A name outside the public namespace may be a signed-only stream: never readable by name.
    if (!params.stream_name.startsWith(config.publicStreamPrefix)) {
      return refuse(
        'not_public',
        `stream_name is not a public stream: public names start with ${JSON.stringify(config.publicStreamPrefix)}`,
      );
    }
    return { ok: true, stream: params.stream_name, whisper: true };
  }
  return refuse('no_stream', 'identifier names no stream_name or signed_stream_name');
}

/** The keys a `$pubsub` identifier may have (AnyCable's clients send these only). */
const PUBSUB_KEYS = new Set(['channel', 'stream_name', 'signed_stream_name']);

function refuse(
  reason: StreamRefusalReason,
  message: string,
): { ok: false; refusal: StreamRefusal } {
  return { ok: false, refusal: { reason, message } };
}
