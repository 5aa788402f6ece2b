/**
 * One Lambda instance of a function that `npm start` runs in a worker thread (see
 * preload.mjs): loads the handler once and runs one invocation at a time, as it is sent.
 * The context has its fields and `getRemainingTimeInMillis`; an error goes back with its
 * name, message and stack, which serverless-offline reports as the function's error.
 */
import { parentPort, workerData } from 'node:worker_threads';

const handler = (await import(workerData.url))[workerData.name];
if (typeof handler !== 'function') {
  throw new Error(`${workerData.url} exports no function ${workerData.name}`);
}

parentPort.on('message', async ({ event, context, deadline, port }) => {
  const lambdaContext = {
    ...context,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  try {
    port.postMessage({ ok: true, value: await handler(event, lambdaContext) });
  } catch (error) {
    port.postMessage({
      ok: false,
      name: error?.name ?? 'Error',
      message: error?.message ?? String(error),
      stack: error?.stack,
    });
  }
  port.close();
});
