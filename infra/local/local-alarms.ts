import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { MonitoringSettings } from '../deploy/monitoring/settings';
import { RELAY_LAG_ALARM, RELAY_REFUSED_ALARM, UNDELIVERED_FRAMES_ALARM } from '../deploy/names';

/** A queue whose messages mean trouble (a DLQ, the relay-failures queue), with its alarm. */
export interface WatchedQueue {
  /** The deployed alarm's logical id, e.g. `BroadcastDlqAlarm`. */
  readonly alarm: string;
  readonly name: string;
  readonly url: string;
}

/** Options of {@link LocalAlarms}. */
export interface LocalAlarmsOptions {
  readonly sqs: SQSClient;
  readonly queues: readonly WatchedQueue[];
  readonly settings: MonitoringSettings;
  /** Gets each line. @default console.log */
  readonly print?: (line: string) => void;
  /** How often the queues are read. @default 2000 ms */
  readonly intervalMs?: number;
}

/** The runbook page every line points to. */
const RUNBOOK = 'docs/operations.md';

/**
 * What the deployed alarms catch, as one live line each on `npm start`: a message in a
 * dead-letter or the relay-failures queue (the queues are read every 2 s), the stream relay
 * falling behind (its records' age, as `IteratorAge`), and frames the fan-out gave up on or
 * records the relay refused (the functions' own metrics, read from their output). A line
 * says `ALARM` when the condition starts and `OK` when it ends.
 */
export class LocalAlarms {
  private readonly print: (line: string) => void;
  private readonly depths = new Map<string, number>();
  private lagging = false;
  private partial = '';
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(private readonly options: LocalAlarmsOptions) {
    this.print = options.print ?? ((line) => console.log(line));
  }

  /** Starts reading the queues. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.reading ??= this.readQueues().finally(() => {
        this.reading = undefined;
      });
    }, this.options.intervalMs ?? 2_000);
    this.timer.unref();
  }

  /** Stops reading the queues (waits for a read under way). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.reading;
  }

  /** The age of the oldest record of a batch the relay was handed, in ms. */
  iteratorAge(ms: number): void {
    const threshold = this.options.settings.iteratorAgeMs;
    if (ms >= threshold && !this.lagging) {
      this.lagging = true;
      this.line('ALARM', RELAY_LAG_ALARM, `the stream relay is ${Math.round(ms / 1000)} s behind`);
    } else if (ms < threshold && this.lagging) {
      this.lagging = false;
      this.line('OK', RELAY_LAG_ALARM, 'the stream relay caught up');
    }
  }

  /**
   * The functions' output, chunk by chunk: each Powertools metrics line (CloudWatch embedded
   * metric format) with undelivered frames or refused relay records makes a line.
   */
  output(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    if (this.partial.length > 1_000_000) this.partial = '';
    for (const line of lines) {
      if (!line.includes('"_aws"')) continue;
      const count = (metric: string) =>
        Number(new RegExp(`"${metric}":(\\d+)`).exec(line)?.[1] ?? 0);
      const undelivered = count('undeliveredFrames');
      if (undelivered > 0) {
        this.line('ALARM', UNDELIVERED_FRAMES_ALARM, `${undelivered} frame(s) undelivered`);
      }
      const refused = count('relayRefusedRecords');
      if (refused > 0) {
        this.line('ALARM', RELAY_REFUSED_ALARM, `the relay refused ${refused} outbox record(s)`);
      }
    }
  }

  private async readQueues(): Promise<void> {
    await Promise.all(
      this.options.queues.map(async (queue) => {
        let depth: number;
        try {
          const out = await this.options.sqs.send(
            new GetQueueAttributesCommand({
              QueueUrl: queue.url,
              AttributeNames: ['ApproximateNumberOfMessages'],
            }),
          );
          depth = Number(out.Attributes?.ApproximateNumberOfMessages ?? 0);
        } catch {
          return; // fauxqs stopping, or busy: the next read tells
        }
        const before = this.depths.get(queue.url) ?? 0;
        this.depths.set(queue.url, depth);
        const threshold = this.options.settings.deadLetterMessages;
        if (depth >= threshold && depth > before) {
          this.line('ALARM', queue.alarm, `${depth} message(s) in ${queue.name}`);
        } else if (depth < threshold && before >= threshold) {
          this.line('OK', queue.alarm, `${queue.name} is empty again`);
        }
      }),
    );
  }

  private line(state: 'ALARM' | 'OK', alarm: string, what: string): void {
    this.print(`lambdacable ${state} ${alarm}: ${what} (${RUNBOOK})`);
  }
}
