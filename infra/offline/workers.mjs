/**
 * Lambda instances as worker threads, for `npm start` (see preload.mjs): a pool per handler,
 * where an invocation takes an idle worker or starts a new one, and gives it back when done.
 */
import { MessageChannel, Worker } from 'node:worker_threads';

const WORKER = new URL('./worker.mjs', import.meta.url);

/**
 * The workers of the handler `name` exported by the module at `url`, each with the
 * environment `env` (its own `process.env`, as a Lambda instance has).
 */
export function workerPool(url, name, env) {
  const idle = [];
  const busy = new Set();
  let closed = false;

  /** Runs one invocation; rejects with the handler's error, or when the worker dies. */
  function invoke(event, context) {
    if (closed) return Promise.reject(new Error(`the workers of ${url} were stopped`));
    return new Promise((resolve, reject) => {
      const worker =
        idle.pop() ?? new Worker(WORKER, { env: { ...env }, workerData: { url, name } });
      // Idle workers do not keep serverless-offline alive.
      worker.unref();
      busy.add(worker);
      const { port1, port2 } = new MessageChannel();
      // A worker that dies (an uncaught error in a timer, say) fails its invocation and is not
      // reused: the next invocation starts a new one, as Lambda replaces a crashed instance.
      const died = (error) => {
        busy.delete(worker);
        port1.close();
        reject(error instanceof Error ? error : new Error(`worker of ${url} exited (${error})`));
      };
      worker.once('error', died).once('exit', died);
      port1.once('message', (m) => {
        worker.off('error', died).off('exit', died);
        busy.delete(worker);
        port1.close();
        if (closed) void worker.terminate();
        else idle.push(worker);
        if (m.ok) resolve(m.value);
        else reject(Object.assign(new Error(m.message), { name: m.name, stack: m.stack }));
      });
      const fields = Object.entries(context ?? {}).filter(([, v]) => typeof v !== 'function');
      const remaining = context?.getRemainingTimeInMillis?.() ?? 900_000;
      worker.postMessage(
        {
          event,
          context: Object.fromEntries(fields),
          deadline: Date.now() + remaining,
          port: port2,
        },
        [port2],
      );
    });
  }

  return {
    handler: invoke,
    /** Workers started and alive: idle and busy. */
    get size() {
      return idle.length + busy.size;
    },
    /** Stops the idle workers now and the busy ones when their invocation ends. */
    async close() {
      closed = true;
      await Promise.all(idle.splice(0).map((w) => w.terminate()));
    },
  };
}
