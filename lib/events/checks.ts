import { checkSqsBody } from '../messaging/envelope.js';
import type { OutboxRecord } from '../outbox/types.js';
import type { EventType } from './event.js';

/** Event types by name, whose `check` applies to raw records of that type. */
export type EventTypeLookup = ReadonlyMap<string, EventType<unknown>>;

/** A lookup of `types` by name, for {@link checkOutboxRecord}. */
export function eventTypeLookup(types: Iterable<EventType<unknown>>): EventTypeLookup {
  return new Map([...types].map((t) => [t.name, t]));
}

/**
 * Refuses, before commit, an outbox record that could be committed but never reach its
 * consumers: throws `LimitExceededError` when the SQS body the relay would send for it is over
 * `MAX_SQS_BODY_BYTES` (at the largest offset), and, when `types` knows the record's type,
 * whatever that type's `check` throws for the decoded payload (a broadcast over the frame
 * limit). A payload the local schema cannot read (another schema version) is not checked
 * further: the consumer reads it with the registry.
 */
export function checkOutboxRecord(record: OutboxRecord, types?: EventTypeLookup): void {
  checkSqsBody(record);
  const type = record.type ? types?.get(record.type) : undefined;
  if (!type) return;
  let value: unknown;
  try {
    // Confluent framing: magic byte and 4-byte schema id, then Avro binary.
    value = type.avroType.fromBuffer(Buffer.from(record.payload.subarray(5)));
  } catch {
    return;
  }
  type.check(value);
}
