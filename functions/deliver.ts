import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { FanoutTask, FanoutTaskReport } from '../lib/core';
import { delivery, metrics as runtimeMetrics } from './runtime';

/**
 * One fan-out task, invoked by the broadcast consumer (or by another task) for a part of a
 * large audience: posts to at most `LAMBDACABLE_FANOUT_TASK_SIZE` subscribers, or hands parts
 * to tasks of its own, and resolves to what it and they did.
 */
export const handler = async (task: FanoutTask): Promise<FanoutTaskReport> => {
  const { fanout } = delivery();
  const metrics = runtimeMetrics();
  try {
    return await fanout.runTask(task);
  } finally {
    // Every frame given up on is counted here and logged with its connection and stream.
    const frames = fanout.takeCounts();
    metrics.addMetric('deliveredFrames', MetricUnit.Count, frames.delivered);
    metrics.addMetric('undeliveredFrames', MetricUnit.Count, frames.undelivered);
    metrics.addMetric('retriedPosts', MetricUnit.Count, frames.retried);
    metrics.addMetric('redeliveredFrames', MetricUnit.Count, frames.redelivered);
    metrics.addMetric('goneConnections', MetricUnit.Count, frames.gone);
    metrics.publishStoredMetrics();
  }
};
