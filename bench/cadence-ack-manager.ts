/**
 * A plain port of Cadence's `common/messaging` ack manager, kept only as the
 * benchmark baseline: its ack scans every id from the ack level to the read level.
 */
export class CadenceAckManager {
  private readLevel = -1n;
  private ackLevel = -1n;
  private readonly outstanding = new Map<bigint, boolean>();

  readItem(id: bigint): void {
    if (id <= this.readLevel) throw new Error(`${id} <= ${this.readLevel}`);
    if (this.ackLevel === -1n) this.ackLevel = id - 1n;
    this.readLevel = id;
    this.outstanding.set(id, false);
  }

  ackItem(id: bigint): bigint {
    if (this.outstanding.get(id) === false) this.outstanding.set(id, true);
    for (let current = this.ackLevel + 1n; current <= this.readLevel; current++) {
      const acked = this.outstanding.get(current);
      if (acked === undefined) continue;
      if (!acked) return this.ackLevel;
      this.ackLevel = current;
      this.outstanding.delete(current);
    }
    return this.ackLevel;
  }
}
