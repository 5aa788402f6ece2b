export { SubscriptionTracking } from './broker/base';
export {
  historyFromRetained,
  type StoredMessage,
  type StreamMeta,
} from './broker/history';
export { LegacyBroker } from './broker/legacy';
export { MemoryBroker } from './broker/memory';
export { StreamsTracker } from './broker/streams-tracker';
export {
  type Broadcaster,
  type Broker,
  type BrokerConfig,
  type BrokerOptions,
  type Cacheable,
  defaultBrokerConfig,
  type RemoteCommandMessage,
  type StreamMessage,
} from './broker/types';
export * from './errors';
export { AvroCodec, frame, unframe } from './events/avro';
export {
  defineEvent,
  type Event,
  type EventDefinition,
  type EventHeader,
  type EventMetadata,
  type EventRecordSchema,
  EventTopics,
  type EventType,
  withKey,
} from './events/event';
export { newEventId } from './events/event-id';
export {
  assertBackwardCompatible,
  canonicalSchema,
  MemorySchemaRegistry,
  type SchemaRegistry,
} from './events/schema-registry';
export {
  createEventSender,
  type EventSender,
  type EventSenderOptions,
  NoopEventSender,
  type SenderStats,
} from './events/sender';
export {
  type DeadLetter,
  MemoryClient,
  type MemoryClientOptions,
  MemoryQueue,
  type QueuedMessage,
} from './memory/messaging';
export { MemoryOutbox, MemoryTransaction } from './memory/outbox';
export { AckManager, PartitionAckManager } from './messaging/ack-manager';
export {
  type Client,
  type Clock,
  type CloseableProducer,
  type Consumer,
  defaultRetryPolicy,
  exponentialBackoff,
  type Message,
  type OutgoingMessage,
  type Producer,
  type PublishOptions,
  type RetryPolicy,
  systemClock,
} from './messaging/types';
export type { OutboxRecord, TxOutbox } from './outbox/types';
