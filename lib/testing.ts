/**
 * `lambdacable/testing`: in-memory doubles of every port (broker, schema registry,
 * connections, management API, messaging, outbox, ack store), for a service's unit tests.
 */
export { MemoryBroker } from './broker/memory.js';
export { MemorySchemaRegistry } from './events/schema-registry.js';
export { MemoryConnectionApi, type PostedFrame } from './gateway/connection-api.js';
export { MemoryConnectionStore } from './gateway/connections.js';
export {
  type DeadLetter,
  MemoryClient,
  type MemoryClientOptions,
  MemoryQueue,
  type QueuedMessage,
} from './memory/messaging.js';
export { MemoryOutbox, MemoryTransaction } from './memory/outbox.js';
export { MemoryAckStore } from './messaging/ack-store.js';
