export {
  ApiGatewayConnectionApi,
  type ApiGatewayConnectionApiOptions,
} from './adapters/apigateway/connection-api';
export { awsCall } from './adapters/call';
export { AwsClient, type AwsClientOptions } from './adapters/client';
export { DynamoAckStore } from './adapters/dynamodb/acks';
export { DynamoBroker, type DynamoBrokerOptions } from './adapters/dynamodb/broker';
export {
  BUCKET_INDEX,
  CONNECTION_BUCKETS,
  connectionBucket,
  DynamoConnectionStore,
  IDENTITY_INDEX,
  STREAM_INDEX,
} from './adapters/dynamodb/connections';
export {
  createOutbox,
  DynamoOutbox,
  type DynamoOutboxOptions,
  MAX_ITEM_BYTES,
  OutboxProducer,
  type OutboxProducerOptions,
  outboxItem,
  recordFromItem,
  writeToOutbox,
} from './adapters/dynamodb/outbox';
export { DynamoSchemaRegistry } from './adapters/dynamodb/schema-registry';
export {
  type BatchConsumerOptions,
  type ConsumedMessage,
  consumeSqsBatch,
  NackError,
} from './adapters/sqs/batch-consumer';
export { SqsConsumer, type SqsConsumerOptions } from './adapters/sqs/consumer';
export { OutboxRelay, type OutboxRelayOptions, type RelayResult } from './adapters/sqs/relay';
export {
  BROADCAST_TOPIC,
  type Broadcast,
  BroadcastEvent,
  type BroadcastRequestItem,
  COMMANDS_KEY,
  hasBroadcastKey,
  parseBroadcastRequest,
  type RemoteCommand,
  RemoteCommandEvent,
} from './broadcasts';
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
  broadcastFrame,
  type DeliveryReport,
  decodeData,
  forEachConcurrently,
  GatewayBroadcaster,
  type GatewayBroadcasterOptions,
  type GatewayLogger,
  noopLogger,
} from './gateway/broadcaster';
export { configFromEnv, defaultGatewayConfig, type GatewayConfig } from './gateway/config';
export {
  type ConnectionApi,
  MemoryConnectionApi,
  type PostedFrame,
} from './gateway/connection-api';
export {
  type ConnectionRecord,
  type ConnectionStore,
  MemoryConnectionStore,
  type Subscription,
} from './gateway/connections';
export {
  type ConnectRequest,
  type ConnectResult,
  EXT_PROTOCOL,
  Gateway,
  type GatewayOptions,
  type PingReport,
  PLAIN_PROTOCOL,
  PUBSUB_CHANNEL,
  Session,
  type SessionState,
  type SessionSubscription,
} from './gateway/gateway';
export {
  type ConnectTokenClaims,
  createConnectToken,
  signStreamName,
  verifyConnectToken,
  verifySignedStreamName,
} from './gateway/tokens';
export {
  type DeadLetter,
  MemoryClient,
  type MemoryClientOptions,
  MemoryQueue,
  type QueuedMessage,
} from './memory/messaging';
export { MemoryOutbox, MemoryTransaction } from './memory/outbox';
export { AckManager, PartitionAckManager } from './messaging/ack-manager';
export { type AckStore, MemoryAckStore } from './messaging/ack-store';
export { decodeEnvelope, type Envelope, encodeEnvelope } from './messaging/envelope';
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
