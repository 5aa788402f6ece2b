import type { FanoutTask, FanoutTaskReport } from '../lib/core';
import { addFrameMetrics, delivery, metrics as runtimeMetrics } from './runtime';

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
    addFrameMetrics(metrics, fanout.takeCounts());
    metrics.publishStoredMetrics();
  }
};
