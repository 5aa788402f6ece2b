/**
 * The loop a local event source mapping polls in (`SqsPoller`, `StreamPoller`): one poll
 * after another until stopped, a failed poll logged and followed by a pause, so that a
 * failing source never turns the loop into a busy one.
 */

/** Options of {@link PollLoop}. */
export interface PollLoopOptions {
  /** One poll; returns how many records it handed over. */
  readonly poll: () => Promise<number>;
  /** What a failed poll is logged as, e.g. `stream poll failed`. */
  readonly failure: string;
  readonly logger: Pick<Console, 'error'>;
  /** Pause after a poll that handed nothing over, in ms. @default none (a long poll waits) */
  readonly idleMs?: number;
  /** Pause after a failed poll, in ms. @default idleMs */
  readonly failureMs?: number;
}

/** Runs {@link PollLoopOptions.poll} in the background between `start` and `stop`. */
export class PollLoop {
  private running = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly options: PollLoopOptions) {}

  /** Polls in the background until {@link stop}. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = (async () => {
      const { idleMs, failureMs = idleMs } = this.options;
      while (this.running) {
        let pause: number | undefined;
        try {
          if ((await this.options.poll()) === 0) pause = idleMs;
        } catch (error) {
          this.options.logger.error(this.options.failure, error);
          pause = failureMs;
        }
        if (pause !== undefined) await new Promise((r) => setTimeout(r, pause));
      }
    })();
  }

  /** Stops after the current poll, and waits for it. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
