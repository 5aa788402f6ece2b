import { describe, expect, it } from 'vitest';
import {
  decodeOffset,
  encodeOffset,
  numberAtOrBelow,
  OFFSET_DIGITS,
  offsetAttribute,
  offsetOf,
} from '../../../../../lib/adapters/aws/dynamodb/offset-attribute';
import { AckManagerError, MAX_ENVELOPE_OFFSET } from '../../../../../lib/core';

/** Offsets in increasing order, across digit counts: 9 < 10, 39 digits < 40 digits. */
const ORDERED = [
  -1n,
  0n,
  1n,
  9n,
  10n,
  11n,
  99n,
  100n,
  18_446_744_073_709_551_615n,
  10n ** 38n - 1n,
  10n ** 38n,
  10n ** 39n - 1n,
  10n ** 39n,
  10n ** 39n + 1n,
  MAX_ENVELOPE_OFFSET - 1n,
  MAX_ENVELOPE_OFFSET,
  // A floor above the highest sequence number.
  MAX_ENVELOPE_OFFSET + 1n,
  10n ** BigInt(OFFSET_DIGITS) - 1n,
];

/** Byte order, as DynamoDB compares strings (the encoding is ASCII). */
const byBytes = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

describe('encodeOffset', () => {
  it('orders the strings as the numbers, whatever their digit count', () => {
    const encoded = ORDERED.map(encodeOffset);
    expect([...encoded].sort(byBytes)).toEqual(encoded);
    expect(new Set(encoded.map((e) => e.length))).toEqual(
      new Set([OFFSET_DIGITS, OFFSET_DIGITS + 1]),
    );
  });

  it('gives back every offset exactly, 40 digits and more', () => {
    for (const offset of ORDERED) expect(decodeOffset(encodeOffset(offset))).toBe(offset);
    expect(encodeOffset(MAX_ENVELOPE_OFFSET)).toBe(`${'0'.repeat(8)}${'9'.repeat(40)}`);
  });

  it('refuses an offset longer than it stores, rather than misorder it', () => {
    expect(() => encodeOffset(10n ** BigInt(OFFSET_DIGITS))).toThrow(AckManagerError);
    expect(() => encodeOffset(-(10n ** BigInt(OFFSET_DIGITS)))).toThrow(AckManagerError);
  });

  it('reads only what it writes', () => {
    for (const text of ['', '-', '12a', '1e5', '-1', ' 7']) {
      expect(() => decodeOffset(text)).toThrow(AckManagerError);
    }
  });
});

describe('offsetOf', () => {
  it('reads the string this release stores and the number an older one stored', () => {
    expect(offsetOf(offsetAttribute(MAX_ENVELOPE_OFFSET))).toBe(MAX_ENVELOPE_OFFSET);
    expect(offsetOf(offsetAttribute(-1n))).toBe(-1n);
    expect(offsetOf({ N: '18446744073709551615000' })).toBe(18_446_744_073_709_551_615_000n);
    expect(offsetOf({ N: '-1' })).toBe(-1n);
    expect(offsetOf(undefined)).toBeUndefined();
    expect(() => offsetOf({ N: '1.5' })).toThrow(AckManagerError);
  });
});

describe('numberAtOrBelow', () => {
  it('is the offset itself when a DynamoDB number holds it (38 digits)', () => {
    for (const offset of [-1n, 0n, 10n ** 38n - 1n]) expect(numberAtOrBelow(offset)).toBe(offset);
  });

  it('rounds a longer offset down to 38 significant digits', () => {
    const nines39 = 10n ** 39n - 1n;
    expect(numberAtOrBelow(nines39)).toBe(nines39 - 9n);
    expect(numberAtOrBelow(MAX_ENVELOPE_OFFSET)).toBe(MAX_ENVELOPE_OFFSET - 99n);
    expect(numberAtOrBelow(10n ** 39n + 1n)).toBe(10n ** 39n);
    expect(numberAtOrBelow(-nines39)).toBe(-(10n ** 39n));
  });
});
