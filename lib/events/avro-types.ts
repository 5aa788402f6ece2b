import type avro from 'avsc';
// The types-only entry (`Type`, `types`) is all events need, and a third of the package:
// the Lambda bundles that decode events stay small.
import avsc from 'avsc/etc/browser/avsc-types.js';
import { AvroValueError } from '../kernel/errors.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Whether `value` fits Avro's `long`: a bigint in int64 range, or a safe integer number. */
function isLong(value: unknown): value is bigint | number {
  if (typeof value === 'bigint') return value >= INT64_MIN && value <= INT64_MAX;
  // A number past 2^53 may already have been rounded: refuse it rather than write a guess.
  return typeof value === 'number' && Number.isSafeInteger(value);
}

function toBigInt(value: unknown): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  // Decimal strings come from `fromString`/`clone` of values beyond 2^53 (see `toJSON`).
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value);
  throw new AvroValueError(`not an Avro long: ${String(value)}`, { avroType: 'long' });
}

// Pure: a bundle that never builds an Avro type drops this (and avsc).
/**
 * Avro `long` as `bigint`, exact over the whole int64 range (avsc's default `long` is a
 * JS number and refuses values past 2^53). Decoding always yields a `bigint`; encoding
 * accepts a `bigint` in int64 range or a safe-integer `number`. In JSON (`toString`,
 * exported field defaults) a long is a number when it is a safe integer, else a decimal
 * string, so nothing is rounded.
 */
export const BigIntLongType: avro.types.LongType = /* @__PURE__ */ avsc.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(0),
  toBuffer: (value: bigint | number) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(toBigInt(value), 0);
    return buf;
  },
  fromJSON: (json: unknown) => {
    const value = toBigInt(json);
    if (!isLong(value)) {
      throw new AvroValueError(`not an Avro long (int64): ${value}`, { avroType: 'long' });
    }
    return value;
  },
  toJSON: (value: bigint | number) => {
    const n = toBigInt(value);
    const asNumber = Number(n);
    return Number.isSafeInteger(asNumber) ? asNumber : n.toString();
  },
  isValid: isLong,
  compare: (a: bigint | number, b: bigint | number) => {
    const x = toBigInt(a);
    const y = toBigInt(b);
    return x === y ? 0 : x < y ? -1 : 1;
  },
});

/** Whether `schema` is a `long`: `"long"` or `{"type":"long", ...}` (e.g. with a `logicalType`). */
function isLongSchema(schema: unknown): boolean {
  return (
    schema === 'long' ||
    (typeof schema === 'object' &&
      schema !== null &&
      !Array.isArray(schema) &&
      (schema as { type?: unknown }).type === 'long')
  );
}

/**
 * The one place the library builds avsc types: `schema` parsed with every `long` as
 * {@link BigIntLongType}. Event types, writer schemas from the registry and the
 * registry's own canonicalisation and compatibility checks all go through it, so a value
 * decodes the same whichever schema wrote it.
 */
export function avroType(schema: avro.Schema): avro.Type {
  // A hook, not `registry: { long }`: avsc consults the registry only for the name
  // `"long"`, not for `{"type":"long","logicalType":"timestamp-millis"}` as Java writes it.
  return avsc.Type.forSchema(schema, {
    typeHook: (s) => (isLongSchema(s) ? BigIntLongType : undefined),
  });
}
