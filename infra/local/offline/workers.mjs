/**
 * Lambda instances as worker threads, for `npm start` (see preload.mjs): a pool per handler,
 * where an invocation takes an idle worker or starts a new one, and gives it back when done.
 */
import { MessageChannel, Worker } from 'node:worker_threads';

const WORKER = new URL('./worker.mjs', import.meta.url);

/**
 * The workers of the handler `name` exported by the module at `url`, each with the
 * environment `env` (its own `process.env`, as a Lambda instance has). `onStart` is told the
 * number of each worker it starts (1 for the first).
 */
export function workerPool(url, name, env, onStart = () => {}) {
  const idle = [];
  const busy = new Set();
  let closed = false;
  let started = 0;

  function start() {
    const worker = new Worker(WORKER, { env: { ...env }, workerData: { url, name } });
    onStart(++started);
    return worker;
  }

  /**
   * Runs one invocation; rejects with the handler's error, when the worker dies, or at the
   * context's deadline (the worker is then stopped).
   */
  function invoke(event, context) {
    if (closed) return Promise.reject(new Error(`the workers of ${url} were stopped`));
    return new Promise((resolve, reject) => {
      const worker = idle.pop() ?? start();
      // Idle workers do not keep serverless-offline alive.
      worker.unref();
      busy.add(worker);
      const { port1, port2 } = new MessageChannel();
      const remaining = context?.getRemainingTimeInMillis?.() ?? 900_000;
      let timer;
      // A worker that dies (an uncaught error in a timer, say) fails its invocation and is not
      // reused: the next invocation starts a new one, as Lambda replaces a crashed instance.
      const died = (error) => {
        clearTimeout(timer);
        busy.delete(worker);
        port1.close();
        reject(error instanceof Error ? error : new Error(`worker of ${url} exited (${error})`));
      };
      worker.once('error', died).once('exit', died);
      // At its timeout Lambda stops the instance, whatever the handler is doing.
      timer = setTimeout(() => {
        worker.off('exit', died);
        died(new Error(`Task timed out after ${(remaining / 1000).toFixed(2)} seconds`));
        void worker.terminate();
      }, remaining);
      timer.unref();
      port1.once('message', (m) => {
        clearTimeout(timer);
        worker.off('error', died).off('exit', died);
        busy.delete(worker);
        port1.close();
        if (closed) void worker.terminate();
        else idle.push(worker);
        if (m.ok) resolve(m.value);
        else reject(Object.assign(new Error(m.message), { name: m.name, stack: m.stack }));
      });
      const fields = Object.entries(context ?? {}).filter(([, v]) => typeof v !== 'function');
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
