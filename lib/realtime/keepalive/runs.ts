import { type Clock, systemClock } from '../../kernel/clock.js';
import { ConfigError, errorMessage, MessageFormatError } from '../../kernel/errors.js';
import { type Logger, noopLogger } from '../../kernel/logger.js';
import type { PingReport } from './options.js';
import {
  estimateLoad,
  isLayout,
  MIN_BUCKETS,
  type PartitionScope,
  type PingerLayout,
  partitionScope,
  planLayout,
  usableLayout,
} from './partitions.js';
import type { PartitionRun, PingerInvoker, PingerLayoutStore } from './ports.js';

/** Options of {@link PingerRuns}. */
export interface PingerRunsOptions {
  readonly layouts: PingerLayoutStore;
  readonly invoker: PingerInvoker;
  /** Pings per second one partition is planned for (`LAMBDACABLE_PINGER_PARTITION_RATE`). */
  readonly partitionRate: number;
  /** @default the system clock */
  readonly clock?: Clock;
  /** @default {@link noopLogger} */
  readonly logger?: Logger;
}

/** What {@link PingerRuns.begin} decided: this invocation's run, and the workers started. */
export interface RunPlan {
  readonly run: PartitionRun;
  /** What this run reads and keeps. */
  readonly scope: PartitionScope;
  /** Workers started (the coordinator's); workers whose invocation failed are logged. */
  readonly started: number;
  readonly failed: number;
}

/** Attempts at a conditional layout write that another coordinator raced. */
const LAYOUT_ATTEMPTS = 3;

/**
 * Splits the pinger's minute into partitions. The scheduled invocation (an event without a
 * partition) is the coordinator: it estimates the pings per second of all connections from
 * the last minute's reports, plans K (and B, raised ahead of K, never lowered), starts the
 * runs of partitions 1..K-1 and runs partition 0 itself. Each run reports what it tracks,
 * for the next minute's plan.
 */
export class PingerRuns {
  private readonly layouts: PingerLayoutStore;
  private readonly invoker: PingerInvoker;
  private readonly rate: number;
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(options: PingerRunsOptions) {
    this.layouts = options.layouts;
    this.invoker = options.invoker;
    this.rate = options.partitionRate;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? noopLogger;
    if (!(this.rate > 0)) {
      throw new ConfigError('partitionRate must be positive', { variable: 'partitionRate' });
    }
  }

  /**
   * This invocation's run: a worker's from its event; the coordinator's partition 0 after it
   * planned the minute and started the other partitions' runs. Throws
   * {@link MessageFormatError} for an event that names a partition badly.
   */
  async begin(event: unknown): Promise<RunPlan> {
    const given = partitionRunOf(event);
    if (given)
      return {
        run: given,
        scope: partitionScope(given.partition, given),
        started: 0,
        failed: 0,
      };
    const layout = await this.plan();
    const run: PartitionRun = { partition: 0, ...layout };
    let failed = 0;
    const workers = Array.from({ length: layout.partitions - 1 }, (_, i) => i + 1);
    await Promise.all(
      workers.map(async (partition) => {
        try {
          await this.invoker.start({ ...run, partition });
        } catch (error) {
          failed++;
          this.logger.error('pinger partition not started', {
            partition,
            error: errorMessage(error),
          });
        }
      }),
    );
    return {
      run,
      scope: partitionScope(0, layout),
      started: workers.length - failed,
      failed,
    };
  }

  /** Stores what a run tracks now, for the next minute's plan. */
  async report(
    run: Pick<PartitionRun, 'partition' | 'partitions'>,
    startedAt: number,
    report: PingReport,
  ): Promise<void> {
    await this.layouts.putReport({
      partition: run.partition,
      partitions: run.partitions,
      connections: report.connections,
      load: report.load,
      startedAt,
      at: this.clock.now(),
    });
  }

  /** Reads the layout and the reports, and stores the planned layout when it changed. */
  private async plan(): Promise<PingerLayout> {
    for (let attempt = 1; ; attempt++) {
      const [stored, reports] = await Promise.all([this.layouts.layout(), this.layouts.reports()]);
      const current = usableLayout(stored);
      const load = estimateLoad(current, reports, this.clock.now());
      const next = planLayout(current, load, this.rate);
      if (next.buckets === stored.buckets && next.partitions === stored.partitions) return next;
      if (await this.layouts.replaceLayout(stored, next)) {
        this.logger.info('pinger layout', { ...next, load, was: current });
        return next;
      }
      // Another coordinator changed it first: plan again over what it stored.
      if (attempt >= LAYOUT_ATTEMPTS) {
        return usableLayout(await this.layouts.layout());
      }
    }
  }
}

/** A worker's run from its event; `undefined` for the coordinator's (no `partition`). */
export function partitionRunOf(event: unknown): PartitionRun | undefined {
  if (typeof event !== 'object' || event === null || !('partition' in event)) return undefined;
  const { partition, partitions, buckets } = event as Record<string, unknown>;
  const run = { partition, partitions, buckets } as PartitionRun;
  if (
    !Number.isInteger(run.partition) ||
    run.partition < 0 ||
    run.partition >= run.partitions ||
    !isLayout(run)
  ) {
    throw new MessageFormatError(
      `a pinger partition event needs partition < partitions <= buckets (powers of two), got: ${JSON.stringify({ partition, partitions, buckets })}`,
    );
  }
  return run;
}

/**
 * B for writers (the connection store's `buckets` option): the stored layout's, read at most
 * once per `ttlMs`. A failed read keeps the last value (at first {@link MIN_BUCKETS}): any B
 * at or under the current one is safe to write under, since B never shrinks.
 */
export function cachedBuckets(
  layouts: Pick<PingerLayoutStore, 'layout'>,
  options: { ttlMs?: number; clock?: Clock; logger?: Logger } = {},
): () => Promise<number> {
  const ttlMs = options.ttlMs ?? 60_000;
  const clock = options.clock ?? systemClock;
  let value = MIN_BUCKETS;
  let readAt = Number.NEGATIVE_INFINITY;
  let pending: Promise<number> | undefined;
  return () => {
    if (clock.now() - readAt < ttlMs) return Promise.resolve(value);
    pending ??= layouts
      .layout()
      .then((layout) => {
        if (isLayout(layout)) value = layout.buckets;
        return value;
      })
      .catch((error: unknown) => {
        options.logger?.warn('pinger layout not read: buckets kept', {
          buckets: value,
          error: errorMessage(error),
        });
        return value;
      })
      .finally(() => {
        readAt = clock.now();
        pending = undefined;
      });
    return pending;
  };
}
