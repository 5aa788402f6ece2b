import type { StreamMessage } from '../../broker/types.js';
import { defineEvent, type EventType } from '../../events/event.js';
import { MessageFormatError } from '../../kernel/errors.js';
import { checkKeyBytes, MAX_STREAM_BYTES } from '../../kernel/limits.js';
import type { PresenceChange } from './ports.js';
import { checkPresence, storedInfo } from './presence.js';

/**
 * The topic of presence changes: the broadcast consumer fans them out as `presence` frames,
 * and a service's consumer group may subscribe to it (docs/presence.md).
 */
export const PRESENCE_TOPIC = 'lambdacable.presence';

/** A presence change as an event: `info` is the member's info as JSON, `null` when none. */
export interface PresenceEventValue {
  readonly stream: string;
  /** `join` or `leave`. */
  readonly type: string;
  readonly id: string;
  readonly info: string | null;
}

/**
 * The built-in presence event, written by the presence store in the transaction of the change;
 * its key is the stream, so one stream's changes keep their order (with its broadcasts' queue).
 */
export const PresenceEvent: EventType<PresenceEventValue> =
  /* @__PURE__ */ defineEvent<PresenceEventValue>({
    name: 'lambdacable.Presence',
    topic: PRESENCE_TOPIC,
    schema: {
      type: 'record',
      fields: [
        { name: 'stream', type: 'string' },
        { name: 'type', type: 'string' },
        { name: 'id', type: 'string' },
        { name: 'info', type: ['null', 'string'], default: null },
      ],
    },
    key: (value) => value.stream,
    check: (value) => {
      checkKeyBytes('presence event: "stream"', value.stream, MAX_STREAM_BYTES);
      storedInfo('', value.id, infoOf(value));
    },
  });

/** An event's info, parsed; throws {@link MessageFormatError} for one that is not JSON. */
function infoOf(value: PresenceEventValue): unknown {
  if (value.info === null) return undefined;
  try {
    return JSON.parse(value.info) as unknown;
  } catch (cause) {
    throw new MessageFormatError('presence event: "info" is not JSON', { cause });
  }
}

/** The event of a change. */
export function presenceEventOf(change: PresenceChange): PresenceEventValue {
  return { stream: change.stream, type: change.type, id: change.id, info: change.info ?? null };
}

/**
 * What subscribers get of a presence event: AnyCable's `presence` message (`{type, id, info}`
 * for a join, `{type, id}` for a leave), as a transient stream message: no history, no offset.
 * An event of another type, or whose info is not JSON, is `undefined` (the consumer parks it).
 */
export function presenceMessage(value: PresenceEventValue): StreamMessage | undefined {
  if (value.type !== 'join' && value.type !== 'leave') return undefined;
  let message: Record<string, unknown> = { type: value.type, id: value.id };
  if (value.type === 'join' && value.info !== null) {
    let info: unknown;
    try {
      info = JSON.parse(value.info);
    } catch {
      return undefined;
    }
    if (!checkPresence(value.id, info).ok) return undefined;
    message = { ...message, info };
  }
  return {
    stream: value.stream,
    data: JSON.stringify(message),
    meta: { transient: true, presence: true },
  };
}
