import {
  DEFAULT_LAYOUT,
  type PartitionReport,
  type PingerLayout,
} from '../../realtime/keepalive/partitions.js';
import type { PingerLayoutStore } from '../../realtime/keepalive/ports.js';

/** An in-memory {@link PingerLayoutStore}. */
export class MemoryPingerLayoutStore implements PingerLayoutStore {
  private stored: PingerLayout | undefined;
  private readonly runs = new Map<number, PartitionReport>();

  async layout(): Promise<PingerLayout> {
    return this.stored ?? DEFAULT_LAYOUT;
  }

  async replaceLayout(current: PingerLayout, next: PingerLayout): Promise<boolean> {
    const stored = this.stored ?? DEFAULT_LAYOUT;
    if (stored.buckets !== current.buckets || stored.partitions !== current.partitions) {
      return false;
    }
    this.stored = { buckets: next.buckets, partitions: next.partitions };
    return true;
  }

  async reports(): Promise<PartitionReport[]> {
    return [...this.runs.values()];
  }

  async putReport(report: PartitionReport): Promise<void> {
    const known = this.runs.get(report.partition);
    if (!known || known.startedAt <= report.startedAt) this.runs.set(report.partition, report);
  }
}
