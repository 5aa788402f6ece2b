import type { AttributeValue, ConsumedCapacity, DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** Capacity units a client's calls consumed, as DynamoDB reported them. */
export interface CapacityMeter {
  /** Units reported since the last reset. */
  units: number;
  /** Calls since the last reset. */
  calls: number;
  /** The items each call returned (`Items` of a Query or Scan page), in call order. */
  pages: Record<string, AttributeValue>[][];
  reset(): void;
}

/**
 * Makes every call of `client` ask for `ReturnConsumedCapacity: 'TOTAL'` (a middleware, so
 * the adapters' own calls are measured unchanged) and adds up what DynamoDB reports.
 */
export function meterCapacity(client: DynamoDBClient): CapacityMeter {
  const meter: CapacityMeter = {
    units: 0,
    calls: 0,
    pages: [],
    reset() {
      meter.units = 0;
      meter.calls = 0;
      meter.pages = [];
    },
  };
  client.middlewareStack.add(
    (next) => async (args) => {
      (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity = 'TOTAL';
      const out = await next(args);
      const output = out.output as {
        ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[];
        Items?: Record<string, AttributeValue>[];
      };
      meter.calls++;
      for (const c of [output.ConsumedCapacity ?? []].flat()) meter.units += c.CapacityUnits ?? 0;
      meter.pages.push(output.Items ?? []);
      return out;
    },
    { step: 'initialize', name: 'benchCapacityMeter' },
  );
  return meter;
}

/**
 * An item's size by DynamoDB's rules (attribute names plus values: strings and binaries by
 * their bytes, numbers about one byte per two digits plus one, booleans and nulls one byte,
 * 3 bytes per map or list), to check the units an emulator reports.
 */
export function itemBytes(item: Record<string, AttributeValue>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name) + valueBytes(value);
  }
  return bytes;
}

function valueBytes(v: AttributeValue): number {
  if (v.S !== undefined) return Buffer.byteLength(v.S);
  if (v.N !== undefined) return Math.ceil(v.N.replace(/[-.]/g, '').length / 2) + 1;
  if (v.B !== undefined) return v.B.byteLength;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.SS) return v.SS.reduce((n, s) => n + Buffer.byteLength(s), 0);
  if (v.NS) return v.NS.reduce((n, s) => n + Math.ceil(s.length / 2) + 1, 0);
  if (v.L) return 3 + v.L.reduce((n, e) => n + 1 + valueBytes(e), 0);
  if (v.M) return 3 + itemBytes(v.M) + Object.keys(v.M).length;
  return 0;
}

/**
 * Read units of an eventually consistent Query or Scan page on AWS: the items' total size
 * rounded up to 4 KB, half a unit per 4 KB.
 */
export function eventualReadUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 4096)) * 0.5;
}
