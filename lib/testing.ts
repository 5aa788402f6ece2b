/**
 * `lambdacable/testing`: in-memory doubles of every port (broker, schema registry,
 * connections, management API, messaging, outbox, ack store, pinger layout and invoker,
 * presence, request ids), for a service's unit tests.
 */

export { MemoryAckStore } from './adapters/memory/ack-store.js';
export { MemoryBroker, type MemoryBrokerOptions } from './adapters/memory/broker.js';
export { MemoryClient, type MemoryClientOptions } from './adapters/memory/client.js';
export { MemoryConnectionApi, type PostedFrame } from './adapters/memory/connection-api.js';
export { MemoryConnectionStore } from './adapters/memory/connections.js';
export { MemoryOutbox, MemoryTransaction } from './adapters/memory/outbox.js';
export { MemoryPingerInvoker } from './adapters/memory/pinger-invoker.js';
export { MemoryPingerLayoutStore } from './adapters/memory/pinger-layout.js';
export { MemoryPresenceStore } from './adapters/memory/presence.js';
export { type DeadLetter, MemoryQueue, type QueuedMessage } from './adapters/memory/queue.js';
export { MemoryRateLimiter } from './adapters/memory/rate-limiter.js';
export {
  MemoryRequestIdStore,
  type MemoryRequestIdStoreOptions,
} from './adapters/memory/request-ids.js';
export { MemorySchemaRegistry } from './adapters/memory/schema-registry.js';
export { MemorySessionCache, type MemorySessionCacheOptions } from './adapters/memory/sessions.js';
export { InProcessTaskRunner, InvocationFailedError } from './adapters/memory/task-runner.js';
