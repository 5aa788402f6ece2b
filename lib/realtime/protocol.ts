import type { StreamMessage } from '../broker/types.js';
import { MessageFormatError } from '../kernel/errors.js';
import { fingerprint } from '../kernel/limits.js';

/** AnyCable's extended protocol: history and session restore. */
export const EXT_PROTOCOL = 'actioncable-v1-ext-json';
/** Plain Action Cable JSON protocol. */
export const PLAIN_PROTOCOL = 'actioncable-v1-json';
/** The pub/sub channel of signed and public streams. */
export const PUBSUB_CHANNEL = '$pubsub';

/**
 * The subprotocol to answer a `Sec-WebSocket-Protocol` header (comma-separated) with: the
 * extended one when offered, else the plain one, else `undefined`.
 */
export function negotiateProtocol(offered: string | undefined): string | undefined {
  const protocols = (offered ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (protocols.includes(EXT_PROTOCOL)) return EXT_PROTOCOL;
  if (protocols.includes(PLAIN_PROTOCOL)) return PLAIN_PROTOCOL;
  return undefined;
}

/** A client frame that is a JSON object with a command. */
export interface ClientFrame {
  readonly command: string;
  /** The identifier, when it is a string. */
  readonly identifier: string | undefined;
  readonly data?: unknown;
  readonly history?: unknown;
  /** A `join`'s (or a `subscribe`'s) `{"id","info"}`. */
  readonly presence?: unknown;
}

/** The commands of a subscription (every command but `pong`). */
export type ChannelCommand =
  | 'subscribe'
  | 'unsubscribe'
  | 'message'
  | 'whisper'
  | 'history'
  | 'join'
  | 'leave'
  | 'presence';

/** Why a client frame is refused before its connection is looked at. */
export type FrameRefusalReason = 'too_large' | 'not_json_object' | 'no_command';

/** Why a frame's command is refused for its connection. */
export type CommandRefusalReason = 'unknown_command' | 'no_identifier';

/** A refused frame: a `reason` code and the `message` that is logged. */
export interface Refusal<R extends string> {
  readonly reason: R;
  readonly message: string;
  /** The error behind it (the JSON parser's), if any. */
  readonly cause?: unknown;
}

/** A parsed client frame, or why it is refused. */
export type FrameParse =
  | { readonly ok: true; readonly frame: ClientFrame }
  | { readonly ok: false; readonly refusal: Refusal<FrameRefusalReason> };

/** A frame's channel command and identifier, or why they are refused. */
export type CommandCheck =
  | { readonly ok: true; readonly command: ChannelCommand; readonly identifier: string }
  | { readonly ok: false; readonly refusal: Refusal<CommandRefusalReason> };

/** Parses a client frame: at most `maxFrameBytes` (UTF-8), a JSON object with a string command. */
export function parseClientFrame(raw: string, maxFrameBytes: number): FrameParse {
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes > maxFrameBytes) {
    return refuse('too_large', `frame of ${bytes} bytes is over the limit of ${maxFrameBytes}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (cause) {
    return refuse('not_json_object', 'frame is not a JSON object', cause);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    const found = Array.isArray(parsed) ? 'an array' : parsed === null ? 'null' : typeof parsed;
    return refuse(
      'not_json_object',
      'frame is not a JSON object',
      new MessageFormatError(`frame is JSON but ${found}, not an object`),
    );
  }
  const msg = parsed as Record<string, unknown>;
  const command = typeof msg.command === 'string' ? msg.command : undefined;
  if (!command) return refuse('no_command', 'frame has no command');
  const identifier = typeof msg.identifier === 'string' ? msg.identifier : undefined;
  return {
    ok: true,
    frame: { command, identifier, data: msg.data, history: msg.history, presence: msg.presence },
  };
}

/**
 * The frame's command and identifier on a connection of `protocol`: `history` only with the
 * extended protocol (presence with both: AnyCable's clients send it with the extended one),
 * and every command needs an identifier.
 */
export function checkCommand(frame: ClientFrame, protocol: string): CommandCheck {
  const known: ChannelCommand[] = [
    'subscribe',
    'unsubscribe',
    'message',
    'whisper',
    ...(protocol === EXT_PROTOCOL ? (['history'] as const) : []),
    'join',
    'leave',
    'presence',
  ];
  const command = known.find((c) => c === frame.command);
  if (!command) {
    return refuse(
      'unknown_command',
      `unknown command: ${frame.command}, expected one of ${known.join(', ')}`,
    );
  }
  if (frame.identifier === undefined) return refuse('no_identifier', 'frame has no identifier');
  return { ok: true, command, identifier: frame.identifier };
}

function refuse<R extends string>(
  reason: R,
  message: string,
  cause?: unknown,
): { ok: false; refusal: Refusal<R> } {
  return { ok: false, refusal: { reason, message, ...(cause !== undefined ? { cause } : {}) } };
}

/** `welcome`, with `restored` and `restored_ids` after a restore. */
export function welcomeFrame(sid: string, restoredIds?: readonly string[]): string {
  return JSON.stringify(
    restoredIds
      ? { type: 'welcome', sid, restored: true, restored_ids: restoredIds }
      : { type: 'welcome', sid },
  );
}

/** `disconnect` with its reason; the client reconnects only when `reconnect`. */
export function disconnectFrame(reason: string, reconnect: boolean): string {
  return JSON.stringify({ type: 'disconnect', reason, reconnect });
}

/** A reply about one subscription: `confirm_subscription`, `reject_history`, … */
export function replyFrame(
  type: 'confirm_subscription' | 'reject_subscription' | 'confirm_history' | 'reject_history',
  identifier: string,
): string {
  return JSON.stringify({ type, identifier });
}

/** A ping: the time in unix seconds. */
export function pingFrame(nowMs: number): string {
  return JSON.stringify({ type: 'ping', message: Math.floor(nowMs / 1000) });
}

/** A whisper as the other subscribers get it: no stream position (else the client records it). */
export function whisperFrame(identifier: string, data: unknown): string {
  return JSON.stringify({ identifier, message: data });
}

/** A `presence` frame for one subscription: a join, a leave, the `info` reply or an `error`. */
export function presenceFrame(identifier: string, message: unknown): string {
  return JSON.stringify({ type: 'presence', identifier, message });
}

/** The frame of a stream message for one subscription (AnyCable's broadcast reply). */
export function broadcastFrame(identifier: string, msg: StreamMessage): string {
  const message = decodeData(msg.data);
  if (msg.meta?.presence) return presenceFrame(identifier, message);
  if (msg.meta?.transient || msg.offset === undefined || msg.epoch === undefined) {
    return JSON.stringify({ identifier, message });
  }
  return JSON.stringify({
    identifier,
    message,
    stream_id: msg.stream,
    epoch: msg.epoch,
    offset: msg.offset,
  });
}

/** A broadcast's data as subscribers see it: JSON-decoded, or the string itself when not JSON. */
export function decodeData(data: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return data;
  }
}

/**
 * An identifier as logged: a signed stream name is a bearer credential for its stream,
 * so an identifier that carries one is logged as a fingerprint.
 */
export function loggedIdentifier(identifier: string | undefined): string | undefined {
  if (identifier === undefined || !identifier.includes('signed_stream_name')) return identifier;
  return `signed:${fingerprint(identifier)}`;
}

/** The `error` a presence command gets back: `{"type":"presence",…,"message":{"type":"error"}}`. */
export function presenceErrorFrame(identifier: string, reason: string): string {
  return presenceFrame(identifier, { type: 'error', reason });
}
