import type { DynamoDBRecord } from 'aws-lambda';
import type { RelayCallOptions, RelayResult } from './relay.js';

/** What {@link relayInOrder} sends with, and how often it tries. */
export interface RelayInOrderOptions {
  /** Sends the events: an `OutboxRelay` with the deployed relay's routes. */
  readonly relay: {
    relay(records: readonly DynamoDBRecord[], options?: RelayCallOptions): Promise<RelayResult>;
  };
  /**
   * Relay attempts from the first record not sent yet, before the replay gives up.
   * @default 5
   */
  readonly maxAttempts?: number;
}

/** Records handed to one `relay()` call: Lambda's batch size for the relay. */
const RELAY_BATCH = 100;

/**
 * Relays `records` in order, each retried from the first one not sent as Lambda would;
 * returns how many were handed over before the first that never was sent. A record the
 * relay refuses (one it can never send) does not stop the rest: it is counted, and makes
 * it an error.
 */
export async function relayInOrder(
  records: readonly DynamoDBRecord[],
  options: RelayInOrderOptions,
): Promise<{ count: number; refused: ReadonlySet<string>; error: string | undefined }> {
  const maxAttempts = options.maxAttempts ?? 5;
  let done = 0;
  let attempts = 0;
  const refused = new Set<string>();
  while (done < records.length) {
    const batch = records.slice(done, done + RELAY_BATCH);
    let result: RelayResult;
    try {
      result = await options.relay.relay(batch, { replayed: true });
    } catch (error) {
      result = {
        batchItemFailures: [{ itemIdentifier: batch[0]?.dynamodb?.SequenceNumber ?? '' }],
        sent: 0,
        refused: 0,
        refusedSequenceNumbers: [],
        parked: 0,
      };
      if (attempts + 1 >= maxAttempts) {
        return { count: done, refused, error: `relay failed: ${(error as Error).message}` };
      }
    }
    const failed = result.batchItemFailures[0]?.itemIdentifier;
    if (failed === undefined) {
      done += batch.length;
      attempts = 0;
      continue;
    }
    const at = batch.findIndex((r) => r.dynamodb?.SequenceNumber === failed);
    if (at >= 0 && result.refusedSequenceNumbers.includes(failed)) {
      // Retrying cannot help: go on after it (what follows was sent; sending again is harmless).
      refused.add(failed);
      done += at + 1;
      attempts = 0;
      continue;
    }
    done += Math.max(0, at);
    if (at > 0) attempts = 0;
    attempts++;
    if (attempts >= maxAttempts) {
      return {
        count: done,
        refused,
        error: `relay failed ${attempts} times from sequence number ${failed}`,
      };
    }
    await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** attempts)));
  }
  return {
    count: done,
    refused,
    error:
      refused.size > 0
        ? `the relay refused ${refused.size} record(s) it cannot send: ${[...refused].join(', ')}`
        : undefined,
  };
}
