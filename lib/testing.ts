/**
 * `lambdacable/testing`: in-memory doubles of every port (broker, schema registry,
 * connections, management API, messaging, outbox, ack store), for a service's unit tests.
 */
export { MemoryBroker } from './adapters/memory/broker.js';
export {
  type DeadLetter,
  MemoryClient,
  type MemoryClientOptions,
  MemoryQueue,
  type QueuedMessage,
} from './adapters/memory/messaging.js';
export { MemoryOutbox, MemoryTransaction } from './adapters/memory/outbox.js';
export { MemorySchemaRegistry } from './events/schema-registry.js';
export { MemoryAckStore } from './messaging/ack-store.js';
export { MemoryConnectionApi, type PostedFrame } from './realtime/connection-api.js';
export { MemoryConnectionStore } from './realtime/connections.js';
