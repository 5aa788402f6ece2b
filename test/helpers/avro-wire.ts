/**
 * Avro's wire encoding of a long written by hand, as any other language's Avro library
 * writes it: the independent side of the round-trip tests (never the library's own code).
 */

/** The zig-zag varint of a 64-bit long. */
export function zigZagLong(value: bigint): number[] {
  let n = BigInt.asUintN(64, (value << 1n) ^ (value >> 63n));
  const out: number[] = [];
  while (n >= 0x80n) {
    out.push(Number((n & 0x7fn) | 0x80n));
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

/** Reads a zig-zag varint long at `offset`; returns the value and the next offset. */
export function readZigZagLong(bytes: Uint8Array, offset: number): { value: bigint; next: number } {
  let n = 0n;
  let shift = 0n;
  let i = offset;
  for (;;) {
    const b = bytes[i++]!;
    n |= BigInt(b & 0x7f) << shift;
    shift += 7n;
    if ((b & 0x80) === 0) break;
  }
  return { value: (n >> 1n) ^ -(n & 1n), next: i };
}
