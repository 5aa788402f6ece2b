import type { SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MONITORING } from '../../../infra/deploy/monitoring/alarms';
import { LocalAlarms } from '../../../infra/local/local-alarms';

function alarms() {
  const lines: string[] = [];
  const watcher = new LocalAlarms({
    // Not read: these tests give no queue.
    sqs: {} as SQSClient,
    queues: [],
    settings: DEFAULT_MONITORING,
    print: (line) => lines.push(line),
  });
  return { watcher, lines };
}

/** A Powertools metrics line (CloudWatch embedded metric format), as a function prints it. */
const emf = (metrics: Record<string, number>) =>
  JSON.stringify({
    _aws: {
      Timestamp: 1,
      CloudWatchMetrics: [{ Namespace: 'lambdacable', Dimensions: [['service']], Metrics: [] }],
    },
    service: 'lambdacable',
    ...metrics,
  });

describe('LocalAlarms: the live lines npm start prints for what the deployed alarms catch', () => {
  it('prints a line for undelivered frames in a metrics line, also split across chunks, and none for 0', () => {
    const { watcher, lines } = alarms();
    watcher.output(`${emf({ deliveredFrames: 3, undeliveredFrames: 0 })}\n`);
    expect(lines).toEqual([]);
    const line = emf({ deliveredFrames: 1, undeliveredFrames: 2 });
    watcher.output(`log line\n${line.slice(0, 20)}`);
    watcher.output(`${line.slice(20)}\n`);
    expect(lines).toEqual([
      'lambdacable ALARM UndeliveredFramesAlarm: 2 frame(s) undelivered (docs/operations.md)',
    ]);
  });

  it('ignores a log line that only mentions the metric', () => {
    const { watcher, lines } = alarms();
    watcher.output('{"level":"INFO","message":"x","undeliveredFrames":5}\n');
    expect(lines).toEqual([]);
  });

  it('prints ALARM once when the relay falls behind its threshold and OK when it catches up', () => {
    const { watcher, lines } = alarms();
    const threshold = DEFAULT_MONITORING.iteratorAgeMs;
    watcher.iteratorAge(threshold - 1);
    expect(lines).toEqual([]);
    watcher.iteratorAge(threshold);
    watcher.iteratorAge(threshold * 2);
    watcher.iteratorAge(10);
    expect(lines).toEqual([
      `lambdacable ALARM RelayLagAlarm: the stream relay is ${threshold / 1000} s behind (docs/operations.md)`,
      'lambdacable OK RelayLagAlarm: the stream relay caught up (docs/operations.md)',
    ]);
  });
});
