import { createHash } from 'node:crypto';
import { defineEvent, type EventType } from '../../events/event.js';
import { LimitExceededError } from '../../kernel/errors.js';
import {
  checkKeyBytes,
  MAX_BROADCAST_DATA_BYTES,
  MAX_STREAM_BYTES,
  utf8Bytes,
} from '../../kernel/limits.js';
import { decodeData } from '../protocol.js';

/** The topic services write broadcasts and remote commands to; the broadcast consumer reads it. */
export const BROADCAST_TOPIC = 'lambdacable.broadcasts';

/**
 * Key prefix of remote commands that act on no stream: a `disconnect`'s key is
 * `$commands#<target>` (the connection id or identity it acts on), so commands on one target
 * keep their order and one that keeps failing holds up only its own target's; a payload that
 * names none is `$commands`. A remote `unsubscribe` is keyed by its stream instead
 * ({@link remoteCommandKey}).
 */
export const COMMANDS_KEY = '$commands';

/**
 * The key of a remote command. An `unsubscribe` of a stream is keyed by the stream itself,
 * as the stream's broadcasts are ({@link BroadcastEvent}): one outbox partition, one SQS
 * message group, so the broadcast consumer handles it in commit order with them and a
 * broadcast committed after it never reaches a subscription it removed. Any other command
 * (a `disconnect`, acting on an identity or a connection and not on a stream) is
 * {@link COMMANDS_KEY} and the target its payload names. A stream name over
 * {@link MAX_STREAM_BYTES}, which no subscription and no broadcast can have, is keyed as a
 * target: by its hash when it is too long for a key.
 */
export function remoteCommandKey(command: RemoteCommand): string {
  const p = commandPayload(command);
  if (p === undefined) return COMMANDS_KEY;
  if (
    command.command === 'unsubscribe' &&
    typeof p.stream === 'string' &&
    p.stream.length > 0 &&
    utf8Bytes(p.stream) <= MAX_STREAM_BYTES
  ) {
    return p.stream;
  }
  const target = [p.connectionId, p.identity, p.identifier, p.stream].find(
    (v): v is string => typeof v === 'string' && v.length > 0,
  );
  if (target === undefined) return COMMANDS_KEY;
  // A target too long for a key (the command then finds nothing) is grouped by its hash.
  if (utf8Bytes(target) > MAX_COMMAND_TARGET_BYTES) {
    return `${COMMANDS_KEY}#~sha256:${createHash('sha256').update(target, 'utf8').digest('hex')}`;
  }
  return `${COMMANDS_KEY}#${target}`;
}

/** A remote command's payload as an object, or `undefined` when it is not JSON of one. */
export function commandPayload(command: RemoteCommand): Record<string, unknown> | undefined {
  let payload: unknown;
  try {
    payload = JSON.parse(command.payload);
  } catch {
    return undefined;
  }
  return typeof payload === 'object' && payload !== null
    ? (payload as Record<string, unknown>)
    : undefined;
}

/** The longest target a remote command's key holds as it is; a longer one is hashed. */
const MAX_COMMAND_TARGET_BYTES = 1024;

/** A message for a stream's subscribers (AnyCable's broadcast: `{ stream, data }`). */
export interface Broadcast {
  readonly stream: string;
  /** The payload, usually a JSON string; subscribers get it JSON-decoded. */
  readonly data: string;
}

/** A remote command (AnyCable's `{ command, payload }`); `payload` is JSON. */
export interface RemoteCommand {
  readonly command: string;
  readonly payload: string;
}

/** The built-in broadcast event; its key is the stream, so one stream's messages keep their order. */
// Pure: a bundle that uses only the topic names drops the Avro types (and avsc).
export const BroadcastEvent: EventType<Broadcast> = /* @__PURE__ */ defineEvent<Broadcast>({
  name: 'lambdacable.Broadcast',
  topic: BROADCAST_TOPIC,
  schema: {
    type: 'record',
    fields: [
      { name: 'stream', type: 'string' },
      { name: 'data', type: 'string' },
    ],
  },
  key: (value) => value.stream,
  check: (value) => checkBroadcast(value),
});

/** The built-in remote command event, keyed by {@link remoteCommandKey}. */
export const RemoteCommandEvent: EventType<RemoteCommand> =
  /* @__PURE__ */ defineEvent<RemoteCommand>({
    name: 'lambdacable.RemoteCommand',
    topic: BROADCAST_TOPIC,
    schema: {
      type: 'record',
      fields: [
        { name: 'command', type: 'string' },
        { name: 'payload', type: 'string', default: '{}' },
      ],
    },
    key: remoteCommandKey,
    check: (value) => checkRemoteCommand(value),
  });

/**
 * Refuses a broadcast no subscriber could get: a stream name over {@link MAX_STREAM_BYTES}
 * (`kind: 'key'`), or a `data` over {@link MAX_BROADCAST_DATA_BYTES} as given or as
 * re-encoded in the frame (`kind: 'payload'`): the frame must stay under API Gateway's 128 KB.
 * `at` prefixes the message (`item at index 1`).
 */
export function checkBroadcast(value: Broadcast, at = 'broadcast'): void {
  checkKeyBytes(`${at}: "stream"`, value.stream, MAX_STREAM_BYTES);
  // Subscribers get data JSON-decoded and re-encoded in their frame: both must fit.
  const dataBytes = Math.max(
    utf8Bytes(value.data),
    utf8Bytes(JSON.stringify(decodeData(value.data)) ?? ''),
  );
  if (dataBytes > MAX_BROADCAST_DATA_BYTES) {
    throw new LimitExceededError(
      `${at}: "data" is ${dataBytes} bytes, the limit is ${MAX_BROADCAST_DATA_BYTES}`,
      { what: 'data', bytes: dataBytes, limit: MAX_BROADCAST_DATA_BYTES, kind: 'payload' },
    );
  }
}

/**
 * Refuses a remote command over {@link MAX_BROADCAST_DATA_BYTES} (command and payload
 * together, `kind: 'payload'`): the same path as a broadcast, the same limit.
 */
export function checkRemoteCommand(value: RemoteCommand, at = 'remote command'): void {
  const bytes = utf8Bytes(value.payload) + utf8Bytes(value.command);
  if (bytes > MAX_BROADCAST_DATA_BYTES) {
    throw new LimitExceededError(
      `${at}: the command is ${bytes} bytes, the limit is ${MAX_BROADCAST_DATA_BYTES}`,
      { what: 'command', bytes, limit: MAX_BROADCAST_DATA_BYTES, kind: 'payload' },
    );
  }
}
