import type { PartitionRun, PingerInvoker } from '../../realtime/keepalive/ports.js';

/** An in-memory {@link PingerInvoker}: records the runs started and hands each to `onStart`. */
export class MemoryPingerInvoker implements PingerInvoker {
  /** Every run started, in order. */
  readonly started: PartitionRun[] = [];

  constructor(private readonly onStart: (run: PartitionRun) => void = () => {}) {}

  async start(run: PartitionRun): Promise<void> {
    this.started.push(run);
    this.onStart(run);
  }
}
