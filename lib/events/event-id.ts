import { randomBytes } from 'node:crypto';

/**
 * A unique event id that sorts by creation time: 12 hex digits of milliseconds, then
 * 16 random hex digits. Used as outbox sort key and SQS deduplication id.
 */
export function newEventId(nowMs: number): string {
  return `${Math.floor(nowMs).toString(16).padStart(12, '0')}${randomBytes(8).toString('hex')}`;
}
