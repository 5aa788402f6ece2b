import type {
  FanoutTask,
  FanoutTaskReport,
  FanoutTaskRunner,
} from '../../realtime/fanout/ports.js';
import { TaskInvocationError } from '../../realtime/fanout/tree.js';

/**
 * Runs fan-out tasks in this process, each as if in an invocation of its own: the task goes
 * through JSON as a Lambda payload does, and `runTask` is the `deliver` function's (usually
 * `fanout.runTask` of a fan-out built over the same store and API). `fail` injects the failure
 * of an invocation: return true to make that run reject before it starts.
 */
export class InProcessTaskRunner implements FanoutTaskRunner {
  /** Tasks run, failed runs included. */
  invocations = 0;

  constructor(
    private readonly runTask: (task: FanoutTask) => Promise<FanoutTaskReport>,
    private readonly fail: (task: FanoutTask, invocation: number) => boolean = () => false,
  ) {}

  async run(task: FanoutTask): Promise<FanoutTaskReport> {
    const invocation = ++this.invocations;
    const payload = JSON.parse(JSON.stringify(task)) as FanoutTask;
    // A turn of the event loop, as an invoke's round trip has.
    await new Promise((r) => setImmediate(r));
    if (this.fail(payload, invocation)) {
      throw new InvocationFailedError(`invocation ${invocation} failed (injected)`);
    }
    const report = await this.runTask(payload);
    return JSON.parse(JSON.stringify(report)) as FanoutTaskReport;
  }
}

/** An injected failure of an in-process invocation: one that ran and failed (`ended`). */
export class InvocationFailedError extends TaskInvocationError {
  constructor(message: string) {
    super(message, 'ended');
    this.name = 'InvocationFailedError';
  }
}
