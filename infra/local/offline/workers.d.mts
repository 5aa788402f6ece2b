/** A pool of worker threads running one Lambda handler (workers.mjs). */
export interface WorkerPool {
  /** Runs one invocation on an idle worker, or on a new one. */
  handler(event: unknown, context?: LambdaLikeContext): Promise<unknown>;
  /** Workers started and alive: idle and busy. */
  readonly size: number;
  /** Stops the idle workers now and the busy ones when their invocation ends. */
  close(): Promise<void>;
}

/** The fields of a Lambda context; functions are not sent to the worker. */
export type LambdaLikeContext = Record<string, unknown> & {
  getRemainingTimeInMillis?(): number;
};

export function workerPool(
  url: string,
  name: string,
  env: Readonly<Record<string, string | undefined>>,
  onStart?: (instance: number) => void,
): WorkerPool;
