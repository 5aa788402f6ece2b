/**
 * Preloaded into serverless-offline (`--import`) by `npm start`: how its functions run.
 *
 * In process (`--useInProcess`), for the functions a crowd of clients invokes at once: the
 * WebSocket routes and the HTTP broadcast API. serverless-offline's worker threads cost a
 * thread and a cold start (~250 ms of CPU, tens of MB) per concurrent invocation, so 200
 * clients connecting at once need ~600 of them (`$connect`, the welcome, the subscribe) and
 * time out; in process, an invocation costs a function call and each function's module (its
 * Lambda instance's state) is loaded once. But that runner copies each function's environment
 * onto the one shared `process.env`, where concurrent invocations would read each other's
 * (and one function's secret would reach every other). So `process.env` becomes a view of
 * the environment of the invocation that reads it (an `AsyncLocalStorage` entered around
 * every run, starting empty as a worker's does), and of the real one outside invocations.
 *
 * In worker threads of their own, for the functions named in `LAMBDACABLE_OFFLINE_WORKERS`
 * (the ones `npm start`'s pollers and pinger loop invoke, one or two at a time): a worker is
 * a Lambda instance, started on the first invocation that finds none idle and kept for the
 * next. Their SDK calls then run beside serverless-offline's thread instead of on it: a
 * fan-out's posts are signed and sent by the worker while that thread answers them.
 *
 * A rebuilt handler (watch mode) is a new module URL, so the next invocation loads it fresh
 * (in process) or starts a new worker with it (the old ones are stopped).
 *
 * With `LAMBDACABLE_OFFLINE_FRAMES` set, the WebSocket API's `$default` route is an SQS
 * integration, as on AWS: every client frame is sent on the frames FIFO queue, in order per
 * connection (frames-hook.mjs, frames-integration.mjs).
 *
 * All three reach private files of serverless-offline, so the version and the hook points are
 * checked first (hook-check.mjs): when they are not what this was written against, the
 * process exits 1 with the reason on stderr, which `npm start` (infra/local/offline/launch.ts) throws.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isMainThread } from 'node:worker_threads';
import { FRAMES_VARIABLE, hookFrames } from './frames-hook.mjs';
import {
  packageProblem,
  runnerProblem,
  WEB_SOCKET_CLIENTS_FILE,
  webSocketClientsProblem,
} from './hook-check.mjs';
import { workerPool } from './workers.mjs';

if (isMainThread) {
  const packageDir = fileURLToPath(
    new URL('../../../node_modules/serverless-offline', import.meta.url),
  );
  const runnerDir = new URL(
    '../../../node_modules/serverless-offline/src/lambda/handler-runner/in-process-runner/',
    import.meta.url,
  );
  await exitOn(packageProblem(packageDir));
  const ric = createRequire(runnerDir)('./aws-lambda-ric/UserFunction.js');

  const envs = new AsyncLocalStorage();
  const real = process.env;
  const env = () => envs.getStore() ?? real;
  process.env = new Proxy(
    {},
    {
      get: (_, key) => (typeof key === 'string' ? env()[key] : undefined),
      set: (_, key, value) => {
        env()[key] = String(value);
        return true;
      },
      has: (_, key) => key in env(),
      deleteProperty: (_, key) => delete env()[key],
      ownKeys: () => Object.keys(env()),
      getOwnPropertyDescriptor: (_, key) =>
        key in env()
          ? { value: env()[key], writable: true, enumerable: true, configurable: true }
          : undefined,
      defineProperty: (_, key, d) => {
        env()[key] = String(d.value);
        return true;
      },
    },
  );
  const inWorkers = new Set((real.LAMBDACABLE_OFFLINE_WORKERS ?? '').split(',').filter(Boolean));
  const pools = new Map();
  const load = ric.load;
  ric.load = async (appRoot, handler) => {
    const dot = handler.lastIndexOf('.');
    const file = `${handler.slice(0, dot)}.mjs`;
    const name = handler.slice(dot + 1);
    let version;
    try {
      version = statSync(file).mtimeMs;
    } catch {
      return load(appRoot, handler);
    }
    const url = `${pathToFileURL(file).href}?v=${version}`;
    // The runner has just copied the function's environment into this invocation's store.
    const fnEnv = envs.getStore();
    if (fnEnv && inWorkers.has(fnEnv.AWS_LAMBDA_FUNCTION_NAME)) {
      return poolOf(`${file}#${name}`, url, name, fnEnv).handler;
    }
    const module = await import(url);
    return module[name] ?? load(appRoot, handler);
  };

  // Imported after the patch: its named import of `load` is bound when it is evaluated.
  const { default: InProcessRunner } = await import(new URL('InProcessRunner.js', runnerDir).href);
  await exitOn(runnerProblem(packageDir, InProcessRunner));
  const run = InProcessRunner.prototype.run;
  InProcessRunner.prototype.run = function (event, context) {
    return envs.run({}, () => run.call(this, event, context));
  };

  // The $default route's SQS integration, when the stack has a frames queue (frames-hook.mjs).
  if (real[FRAMES_VARIABLE]) {
    const file = new URL(WEB_SOCKET_CLIENTS_FILE, pathToFileURL(`${packageDir}/`));
    const { default: WebSocketClients } = await import(file.href);
    await exitOn(webSocketClientsProblem(packageDir, WebSocketClients));
    await exitOn(await hookFrames(real[FRAMES_VARIABLE], WebSocketClients));
  }

  /**
   * Ends this process before serverless-offline runs, when the hook cannot be set: functions
   * routed silently in process would hide it. The message is written out before the exit.
   */
  async function exitOn(problem) {
    if (problem === undefined) return;
    await new Promise((resolve) => process.stderr.write(`${problem}\n`, resolve));
    process.exit(1);
  }

  /** The workers of one handler; a new module URL (a rebuild) replaces them. */
  function poolOf(key, url, name, fnEnv) {
    const current = pools.get(key);
    if (current?.url === url) return current.pool;
    void current?.pool.close();
    // Said on stderr, so that the routing is visible (and tested: test/e2e/start.test.ts).
    const fn = fnEnv.AWS_LAMBDA_FUNCTION_NAME;
    const pool = workerPool(url, name, fnEnv, (n) =>
      console.error(`lambdacable offline: ${fn}: Lambda instance ${n} started in a worker thread`),
    );
    pools.set(key, { url, pool });
    return pool;
  }
}
