/**
 * CloudWatch metrics in embedded metric format, and the counts the handlers publish as
 * metrics (the deployed alarms and dashboard watch them: infra/deploy/monitoring/alarms.ts).
 */

import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DeliveryCounts, FrameLimitCounts } from '../../lib/core';
import { part } from './instance';

/** CloudWatch metrics in embedded metric format; handlers publish what they add. */
export function metrics(): Metrics {
  return part(
    'metrics',
    ({ settings }) =>
      new Metrics({ serviceName: settings.serviceName, namespace: settings.metricsNamespace }),
  );
}

/**
 * The fan-out's frame counts as metrics (`broadcast` and `deliver` publish them): every frame
 * given up on is counted in `undeliveredFrames` and logged with its connection and stream.
 */
export function addFrameMetrics(m: Metrics, frames: DeliveryCounts): void {
  m.addMetric('deliveredFrames', MetricUnit.Count, frames.delivered);
  m.addMetric('undeliveredFrames', MetricUnit.Count, frames.undelivered);
  m.addMetric('retriedPosts', MetricUnit.Count, frames.retried);
  m.addMetric('redeliveredFrames', MetricUnit.Count, frames.redelivered);
  m.addMetric('goneConnections', MetricUnit.Count, frames.gone);
}

/**
 * The rate limit's refusals as metrics (`wsDefault` publishes them when there are any):
 * `rateLimitedFrames` (subscribes and history rejected, whispers and messages dropped) and
 * `floodDisconnects` (connections disconnected with `too_many_requests`).
 */
export function addFrameLimitMetrics(m: Metrics, counts: FrameLimitCounts): void {
  m.addMetric('rateLimitedFrames', MetricUnit.Count, counts.rateLimitedFrames);
  m.addMetric('floodDisconnects', MetricUnit.Count, counts.floodDisconnects);
}

/**
 * A consumer batch's outcome as metrics: `consumedMessages`, `failedMessages` (retried) and
 * `parkedMessages` (in the group's DLQ).
 */
export function addConsumerMetrics(
  m: Metrics,
  counts: { consumed: number; failed: number; parked: number },
): void {
  m.addMetric('consumedMessages', MetricUnit.Count, counts.consumed);
  m.addMetric('failedMessages', MetricUnit.Count, counts.failed);
  m.addMetric('parkedMessages', MetricUnit.Count, counts.parked);
}
