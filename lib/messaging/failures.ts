import { isThrottlingError, isTransientError } from '@smithy/core/retry';
import {
  DecodeError,
  LimitExceededError,
  MessageFormatError,
  ThrottledError,
  UnknownEventTypeError,
} from '../kernel/errors.js';

/**
 * What a failure means for the message or record that met it: `permanent` when trying again
 * cannot help (the bytes are what they are), `transient` when a later try may succeed
 * (throttling, a 5xx, a timeout, anything not known to be permanent).
 */
export type FailureKind = 'permanent' | 'transient';

/** Errors that say the message itself is wrong, by class. */
const PERMANENT_CLASSES = [
  MessageFormatError,
  DecodeError,
  UnknownEventTypeError,
  LimitExceededError,
] as const;

/** The same, by `name`: an error that crossed a module copy or a serialization boundary. */
const PERMANENT_NAMES = new Set([
  'MessageFormatError',
  'DecodeError',
  'UnknownEventTypeError',
  'LimitExceededError',
  // JSON.parse of a payload (not of a service's answer: see `isServiceAnswer`).
  'SyntaxError',
]);

/** The SDK's error type, as its classification functions take it. */
type SdkError = Parameters<typeof isTransientError>[0];

/** What an SDK error carries besides `Error`'s fields (`@smithy/types` `SdkError`). */
interface ServiceMarks {
  readonly $metadata?: { readonly httpStatusCode?: number };
  readonly $response?: { readonly statusCode?: number };
  readonly $fault?: string;
}

/**
 * Classifies a failure by what failed, looking at the error and its whole `cause` chain:
 * - `transient` when a service or the network failed anywhere in it: a 5xx (whatever the
 *   error's class: the SDK throws `SyntaxError` for a 503 with an HTML body), `$fault:
 *   'server'`, throttling, a timeout, a reset or refused connection, an aborted call;
 * - else `permanent` for a message that can never be handled: an undecodable envelope or Avro
 *   payload, an unknown event type, bad JSON in a payload, a value over a limit;
 * - else `transient`. Unknown errors are transient on purpose: a retry costs time, a wrong
 *   `permanent` parks a message that would have gone through.
 */
export function classifyFailure(error: unknown): FailureKind {
  const chain: Error[] = [];
  for (let e = error; e instanceof Error && !chain.includes(e); e = e.cause) chain.push(e);
  if (chain.some(isServiceFailure)) return 'transient';
  return chain.some(isMessageFault) ? 'permanent' : 'transient';
}

/**
 * A failure of a service or of the way to it, which a later try may not meet: the SDK's own
 * retry classification (throttling names and `$retryable`, 429, 500/502/503/504, timeouts,
 * ECONNRESET, EPIPE, ETIMEDOUT and other network codes), any 5xx or `$fault: 'server'`, an
 * aborted call (the SDK calls it terminal for its own retry; it says nothing about the
 * message), and lambdacable's {@link ThrottledError}.
 */
function isServiceFailure(e: Error): boolean {
  const marks = e as Error & ServiceMarks;
  const status = marks.$metadata?.httpStatusCode ?? marks.$response?.statusCode;
  return (
    (status !== undefined && status >= 500) ||
    marks.$fault === 'server' ||
    e.name === 'AbortError' ||
    e instanceof ThrottledError ||
    isThrottlingError(e as SdkError) ||
    isTransientError(e as SdkError)
  );
}

/**
 * Whether the service answered: the SDK puts `$metadata` (or at least `$response`) on every
 * error of a call that got a response, a parse error of the answer's body included.
 */
function isServiceAnswer(e: Error): boolean {
  return '$metadata' in e || '$response' in e;
}

/** Says that the message itself is wrong; never a service's answer that failed to parse. */
function isMessageFault(e: Error): boolean {
  if (isServiceAnswer(e)) return false;
  return PERMANENT_CLASSES.some((c) => e instanceof c) || PERMANENT_NAMES.has(e.name);
}

/**
 * Classifies a failed `SendMessageBatch` entry: `SenderFault` means SQS refuses the entry as
 * it is (its body, size or parameters), so sending it again cannot help; any other entry
 * failure is the service's (throttling, an internal error) and is transient.
 */
export function classifyBatchEntry(entry: { readonly SenderFault?: boolean }): FailureKind {
  return entry.SenderFault === true ? 'permanent' : 'transient';
}

/**
 * The consumers' back-off for transient failures: redelivery `receiveCount` is delayed
 * `min(capSeconds, baseSeconds × 2^(receiveCount − 1))`, and after `maxReceiveCount`
 * deliveries the queue's redrive policy moves the message to the DLQ.
 */
export interface RetrySchedule {
  /** @default 2 */
  readonly baseSeconds: number;
  /** @default 120 */
  readonly capSeconds: number;
  /** @default 10 */
  readonly maxReceiveCount: number;
}

/**
 * 2, 4, 8, 16, 32, 64, 120, 120, 120 s between the 10 deliveries: 486 s (8 min 6 s) of
 * retries before the DLQ, enough to ride out a throttling episode; a delay never exceeds
 * 2 minutes, so a recovered dependency is noticed soon (the whole message group waits).
 */
export const DEFAULT_RETRY_SCHEDULE: RetrySchedule = {
  baseSeconds: 2,
  capSeconds: 120,
  maxReceiveCount: 10,
};

/** No retry path may give up on a transient failure sooner than this, in seconds. */
export const MIN_RETRY_WINDOW_SECONDS = 300;

/** Seconds before a message that failed on delivery `receiveCount` (1-based) comes back. */
export function backoffSeconds(
  receiveCount: number,
  schedule: Pick<RetrySchedule, 'baseSeconds' | 'capSeconds'> = DEFAULT_RETRY_SCHEDULE,
): number {
  const n = Math.max(1, Math.floor(receiveCount));
  // 2^30 is far past any cap; the exponent is bounded so the product stays finite.
  return Math.min(schedule.capSeconds, schedule.baseSeconds * 2 ** Math.min(n - 1, 30));
}

/**
 * Seconds from a message's first failed delivery to its last one under `schedule`, not
 * counting the handler's own time: the sum of the back-offs between its `maxReceiveCount`
 * deliveries. A transient failure shorter than this never dead-letters a message.
 */
export function retryWindowSeconds(schedule: RetrySchedule = DEFAULT_RETRY_SCHEDULE): number {
  let total = 0;
  for (let n = 1; n < schedule.maxReceiveCount; n++) total += backoffSeconds(n, schedule);
  return total;
}

/**
 * The stream relay's delays, in ms, between its tries of a transiently failed send within
 * one invocation (7.75 s in all); then the invocation reports the record as a batch item
 * failure and Lambda runs it again, up to `maximumRetryAttempts` (100, serverless.yml)
 * times: at least 100 × 7.75 s ≈ 13 minutes before the batch goes to relay-failures.
 */
export const RELAY_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1_000, 2_000, 4_000];

/** The stream event source mapping's `maximumRetryAttempts` (serverless.yml). */
export const RELAY_MAX_RETRY_ATTEMPTS = 100;

/**
 * Seconds the relay keeps retrying a transient failure before Lambda gives the batch up: the
 * in-invocation delays times the invocations (the first and each retry), a lower bound (the
 * sends and Lambda's own delays come on top).
 */
export function relayRetryWindowSeconds(
  delaysMs: readonly number[] = RELAY_RETRY_DELAYS_MS,
  maxRetryAttempts: number = RELAY_MAX_RETRY_ATTEMPTS,
): number {
  return ((maxRetryAttempts + 1) * delaysMs.reduce((a, b) => a + b, 0)) / 1000;
}
