import {
  type ConnectionApi,
  Fanout,
  type FanoutTask,
  type FanoutTaskReport,
  type FanoutTaskRunner,
  type FanoutTasksOptions,
  TaskInvocationError,
} from '../../lib/core';
import type { MemoryConnectionStore } from '../../lib/testing';
import { MemorySessionCache } from '../../lib/testing';

/** How unkind the runner is: each a probability per Invoke, or a time in ms. */
export interface Unkindness {
  /** The caller gets no answer (a lost response, its own timeout): the task runs on. */
  readonly orphan: number;
  /** The task is killed part way (its function's timeout, a crash): it posts nothing more. */
  readonly kill: number;
  /** Invoke answers `TooManyRequestsException` (beside the concurrency limit). */
  readonly throttle: number;
  /** Invocations at once past which Invoke answers `TooManyRequestsException`. */
  readonly concurrencyLimit: number;
  /** A cold start's time, ms, for one Invoke in 5. */
  readonly coldStartMs: number;
  /** A post's time, ms: from 0 to this. */
  readonly postMs: number;
  /** How much later an orphan starts than its caller gave up, ms. @default 20 */
  readonly orphanLagMs?: number;
}

/** What happened under the runner. */
export interface RunnerCounts {
  invokes: number;
  orphaned: number;
  killed: number;
  throttled: number;
  running: number;
  maxRunning: number;
}

/**
 * A model of Lambda's synchronous Invoke, unkinder than the emulators: each invocation gets a
 * fan-out of its own (as a Lambda instance has); a task whose caller got no answer runs on
 * and keeps posting (an orphan); a killed task posts nothing more, while the tasks it invoked
 * run on; Invoke is throttled above a concurrency limit and at random; cold starts take time.
 */
export class LambdaLikeRunner implements FanoutTaskRunner {
  readonly counts: RunnerCounts = {
    invokes: 0,
    orphaned: 0,
    killed: 0,
    throttled: 0,
    running: 0,
    maxRunning: 0,
  };
  /** Orphans and killed tasks still running, to be awaited at the end of a test. */
  readonly background: Promise<unknown>[] = [];

  constructor(
    private readonly build: (api: ConnectionApi, runner: FanoutTaskRunner) => Fanout,
    private readonly api: ConnectionApi,
    private readonly unkind: Unkindness,
    private readonly random: () => number,
  ) {}

  async run(task: FanoutTask): Promise<FanoutTaskReport> {
    const c = this.counts;
    c.invokes++;
    const payload = JSON.parse(JSON.stringify(task)) as FanoutTask;
    await new Promise((r) => setImmediate(r));
    if (c.running >= this.unkind.concurrencyLimit || this.random() < this.unkind.throttle) {
      c.throttled++;
      throw new TaskInvocationError('TooManyRequestsException (model)', 'not-started');
    }
    c.running++;
    c.maxRunning = Math.max(c.maxRunning, c.running);
    let killed = false;
    const gone = () => new TaskInvocationError('the process was killed (model)', 'ended');
    // A killed process posts nothing more and invokes nothing more; what it invoked runs on.
    const api: ConnectionApi = {
      post: async (connectionId, frame, endpoint) => {
        await new Promise((r) => setTimeout(r, this.random() * this.unkind.postMs));
        if (killed) throw gone();
        return this.api.post(connectionId, frame, endpoint);
      },
      close: (connectionId, endpoint) => this.api.close(connectionId, endpoint),
    };
    const children: FanoutTaskRunner = {
      run: async (child) => {
        if (killed) throw gone();
        return this.run(child);
      },
    };
    const fate = this.random();
    const orphaned = fate < this.unkind.orphan;
    // An orphan is slow (why its caller gave up): it posts after the caller has gone on.
    const cold =
      (this.random() < 0.2 ? this.unkind.coldStartMs : 0) +
      (orphaned ? (this.unkind.orphanLagMs ?? 20) : 0);
    const work = (async () => {
      await new Promise((r) => setTimeout(r, cold));
      return JSON.parse(
        JSON.stringify(await this.build(api, children).runTask(payload)),
      ) as FanoutTaskReport;
    })().finally(() => {
      c.running--;
    });
    if (orphaned) {
      c.orphaned++;
      this.background.push(work.catch(() => {}));
      await new Promise((r) => setTimeout(r, this.random() * 5));
      throw new TaskInvocationError('no answer (model: the task runs on)', 'unknown');
    }
    if (fate < this.unkind.orphan + this.unkind.kill) {
      c.killed++;
      this.background.push(work.catch(() => {}));
      await new Promise((r) => setTimeout(r, this.random() * 10));
      killed = true;
      // Lambda's answer for a task killed at its timeout: the caller cannot tell what the
      // tasks it invoked are doing.
      throw new TaskInvocationError('Task timed out (model)', 'unknown');
    }
    return work;
  }
}

/** A fan-out over `store`, posting through `api`, with its tasks run by `runner()`. */
export function fanoutOver(
  store: MemoryConnectionStore,
  api: ConnectionApi,
  runner: FanoutTaskRunner,
  tasks: Omit<FanoutTasksOptions, 'runner'>,
): Fanout {
  return new Fanout({
    store,
    api,
    sessions: new MemorySessionCache(),
    concurrency: 4,
    retryPasses: 2,
    retryBackoffMs: 1,
    tasks: { ...tasks, runner },
  });
}
