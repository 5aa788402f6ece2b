import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { AckManagerError } from '../../../kernel/errors.js';

/**
 * Digits of an offset stored as a string. A DynamoDB Streams sequence number has up to 40
 * digits and a DynamoDB number holds only 38 significant ones; a floor can sit one above the
 * highest offset (41 digits), and the rest is room for longer sequence numbers: a new width
 * would have to rewrite every stored item before its strings compared right again.
 */
export const OFFSET_DIGITS = 48;

const SPAN = 10n ** BigInt(OFFSET_DIGITS);
const DIGITS = /^\d+$/;

/**
 * `offset` as a string of fixed width that DynamoDB, comparing strings byte by byte, orders
 * as the numbers: zero-padded to {@link OFFSET_DIGITS} digits. A negative offset (`-1n`, the
 * level of a state with nothing acked yet) is `-` and its distance from 10^48, padded alike:
 * `-` sorts before every digit. Throws {@link AckManagerError} for more than
 * {@link OFFSET_DIGITS} digits.
 */
export function encodeOffset(offset: bigint): string {
  if (offset >= SPAN || offset <= -SPAN) {
    throw new AckManagerError(
      `offset too long to store: ${offset}, expected at most ${OFFSET_DIGITS} digits`,
      { id: offset },
    );
  }
  const digits = (offset < 0n ? SPAN + offset : offset).toString().padStart(OFFSET_DIGITS, '0');
  return offset < 0n ? `-${digits}` : digits;
}

/** The offset {@link encodeOffset} wrote; throws {@link AckManagerError} for anything else. */
export function decodeOffset(text: string): bigint {
  const negative = text.startsWith('-');
  const digits = negative ? text.slice(1) : text;
  if (!DIGITS.test(digits) || (negative && digits.length !== OFFSET_DIGITS)) {
    throw new AckManagerError(`not a stored offset: ${text.slice(0, 60)}`);
  }
  return negative ? BigInt(digits) - SPAN : BigInt(digits);
}

/** An offset as the attribute this release stores: the string of {@link encodeOffset}. */
export function offsetAttribute(offset: bigint): AttributeValue {
  return { S: encodeOffset(offset) };
}

/**
 * The offset an attribute holds, or `undefined` when it is absent: the string this release
 * writes, or the number (N) an older release wrote.
 */
export function offsetOf(value: AttributeValue | undefined): bigint | undefined {
  if (value?.S !== undefined) return decodeOffset(value.S);
  if (value?.N === undefined) return undefined;
  if (!/^-?\d+$/.test(value.N)) throw new AckManagerError(`not a stored offset: ${value.N}`);
  return BigInt(value.N);
}

/**
 * The greatest integer at or below `offset` that a DynamoDB number (38 significant digits)
 * holds exactly: `offset` itself when it fits, else `offset` with its digits past the 38th
 * rounded down to zeros.
 */
export function numberAtOrBelow(offset: bigint): bigint {
  const digits = (offset < 0n ? -offset : offset).toString().length;
  if (digits <= 38) return offset;
  const scale = 10n ** BigInt(digits - 38);
  // BigInt division rounds toward zero: down for a positive offset, up for a negative one.
  const rounded = (offset / scale) * scale;
  return rounded > offset ? rounded - scale : rounded;
}
