/**
 * The composition root: the one place that reads the environment (`env.ts`) and wires the
 * library's adapters for the Lambda handlers in this folder, which import what they use from
 * here. Behind it, one module per job: the instance's runtime and the cache of its parts
 * (`instance.ts`), the SDK clients (`clients.ts`), the real-time parts (`realtime.ts`), the
 * messaging parts (`messaging.ts`) and the metrics (`metrics.ts`). Each part is built on
 * first use, once per Lambda instance, and is its own function so that a handler's bundle
 * holds only the parts it uses (esbuild drops the rest) and its cold start builds only those.
 */

export { CLIENT_DEFAULTS } from './runtime/clients';
export { type Env, readSettings, type Settings } from './runtime/env';
export { buildRuntime, type Runtime, runtime, useSecrets } from './runtime/instance';
export { codec, consumer, deadLetterOf, producer, relay } from './runtime/messaging';
export { addFrameLimitMetrics, addFrameMetrics, metrics } from './runtime/metrics';
export { connectionReader, delivery, gateway, pingerRuns, realtime } from './runtime/realtime';
