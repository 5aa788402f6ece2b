import { AckManager } from '../lib/core';
import { CadenceAckManager } from './cadence-ack-manager';
import { type BenchResult, measure, shuffled } from './util';

interface Acker {
  readItem(id: bigint): void;
  ackItem(id: bigint): bigint;
}

function run(make: () => Acker, ids: bigint[], ackOrder: bigint[]): void {
  const m = make();
  for (const id of ids) m.readItem(id);
  let level = -1n;
  for (const id of ackOrder) level = m.ackItem(id);
  if (level !== ids[ids.length - 1]) throw new Error(`wrong final ack level: ${level}`);
}

/** AckManager against Cadence's linear scan: contiguous ids, then SQS-like gaps. */
export function benchAckManager(): BenchResult[] {
  const n = 1_000_000;
  const ids = Array.from({ length: n }, (_, i) => BigInt(i + 1));
  const order = shuffled(ids, 42);
  const ours = measure('AckManager, 1M contiguous ids, shuffled acks', n * 2, () =>
    run(() => new AckManager(), ids, order),
  );
  const cadence = measure('Cadence linear scan, same input', n * 2, () =>
    run(() => new CadenceAckManager(), ids, order),
  );

  // SQS sequence numbers jump by ~10^10; the scan walks every id in between.
  const gapped = 200;
  const gap = 100_000n;
  const gIds = Array.from({ length: gapped }, (_, i) => BigInt(i + 1) * gap);
  const gOrder = shuffled(gIds, 7);
  const oursGap = measure(`AckManager, ${gapped} ids ${gap} apart`, gapped * 2, () =>
    run(() => new AckManager(), gIds, gOrder),
  );
  const cadenceGap = measure(`Cadence linear scan, ${gapped} ids ${gap} apart`, gapped * 2, () =>
    run(() => new CadenceAckManager(), gIds, gOrder),
  );
  return [
    { ...ours, ratio: `${(ours.opsPerSec / cadence.opsPerSec).toFixed(2)}x Cadence` },
    cadence,
    { ...oursGap, ratio: `${(oursGap.opsPerSec / cadenceGap.opsPerSec).toFixed(0)}x Cadence` },
    cadenceGap,
  ];
}
