/**
 * `lambdacable`: the pure core. Messaging (AckManager, Message, Producer/Consumer ports),
 * events (defineEvent, EventTopics, Avro codec, sender), the broker and gateway logic and
 * the errors. Nothing here imports the AWS SDK.
 */

export { LegacyBroker } from './broker/legacy.js';
export { StreamsTracker } from './broker/streams-tracker.js';
export {
  type Broadcaster,
  type Broker,
  type BrokerConfig,
  type BrokerOptions,
  type Cacheable,
  defaultBrokerConfig,
  type HistoryReader,
  type RemoteCommandMessage,
  type SessionCache,
  type SessionUpdate,
  type StreamMessage,
} from './broker/types.js';
export {
  AvroCodec,
  frame,
  unframe,
} from './events/avro.js';
export {
  checkOutboxRecord,
  type EventTypeLookup,
  eventTypeLookup,
} from './events/checks.js';
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
} from './events/event.js';
export { newEventId } from './events/event-id.js';
export {
  assertBackwardCompatible,
  type SchemaRegistry,
} from './events/schema-registry.js';
export {
  type CloseOptions,
  createEventSender,
  type EventSender,
  type EventSenderOptions,
  NoopEventSender,
  type SenderCloseReport,
  type SenderStats,
} from './events/sender.js';
export {
  type Clock,
  systemClock,
} from './kernel/clock.js';
export * from './kernel/errors.js';
export {
  MAX_BROADCAST_BODY_BYTES,
  MAX_BROADCAST_DATA_BYTES,
  MAX_BROADCAST_ITEMS,
  MAX_CONNECTION_ID_BYTES,
  MAX_ENVELOPE_OFFSET,
  MAX_IDEMPOTENCY_KEY_CHARS,
  MAX_IDENTIFIER_BYTES,
  MAX_IDENTITY_BYTES,
  MAX_SID_BYTES,
  MAX_SQS_BODY_BYTES,
  MAX_STREAM_BYTES,
} from './kernel/limits.js';
export type { Logger } from './kernel/logger.js';
export {
  AckManager,
  PartitionAckManager,
} from './messaging/ack-manager.js';
export {
  type AckState,
  type AckStore,
  type AckUpdate,
  ackPartition,
} from './messaging/ack-store.js';
export {
  asciiJson,
  checkSqsBody,
  decodeEnvelope,
  type Envelope,
  encodeEnvelope,
  envelopeBody,
  sqsBodyBytes,
} from './messaging/envelope.js';
export {
  backoffSeconds,
  classifyBatchEntry,
  classifyFailure,
  DEFAULT_RETRY_SCHEDULE,
  type FailureKind,
  MIN_RETRY_WINDOW_SECONDS,
  RELAY_MAX_RETRY_ATTEMPTS,
  RELAY_RETRY_DELAYS_MS,
  type RetrySchedule,
  relayRetryWindowSeconds,
  retryWindowSeconds,
} from './messaging/failures.js';
export {
  type Client,
  type CloseableProducer,
  type Consumer,
  defaultRetryPolicy,
  exponentialBackoff,
  type Message,
  type OutgoingMessage,
  type Producer,
  type PublishOptions,
  type RetryPolicy,
} from './messaging/types.js';
export type { OutboxRecord, TxOutbox } from './outbox/types.js';
export {
  MemoryRevocationStore,
  type RevocationStore,
  type RevocationTarget,
  type RevocationTimes,
  revocationKey,
} from './realtime/auth/revocations.js';
export {
  resolveSecrets,
  type SecretReference,
  type SecretSettings,
  secretSettings,
} from './realtime/auth/secret-settings.js';
export {
  type ConnectTokenClaims,
  createConnectToken,
  signStreamName,
  verifyConnectToken,
  verifySignedStreamName,
} from './realtime/auth/tokens.js';
export {
  BROADCAST_TOPIC,
  type Broadcast,
  BroadcastEvent,
  type BroadcastRequestItem,
  checkBroadcast,
  checkRemoteCommand,
  hasBroadcastKey,
  parseBroadcastRequest,
  parseIdempotencyKey,
  type RemoteCommand,
  RemoteCommandEvent,
} from './realtime/broadcasts/broadcasts.js';
export {
  type ComposeRealtimeOptions,
  composeRealtime,
  type PingerSettings,
  type Realtime,
} from './realtime/compose.js';
export {
  BROKER_ADAPTERS,
  type BrokerAdapter,
  configFromEnv,
  defaultGatewayConfig,
  type GatewayConfig,
} from './realtime/config.js';
export {
  type ComposeDeliveryOptions,
  composeDelivery,
  type Delivery,
} from './realtime/fanout/delivery.js';
export {
  type DeliveryCounts,
  type DeliveryReport,
  Fanout,
  type FanoutOptions,
  type StreamDelivery,
} from './realtime/fanout/fanout.js';
export {
  type FanoutTask,
  FanoutTaskError,
  type FanoutTaskReport,
  type FanoutTaskRunner,
  type FanoutTasksOptions,
  FanoutTree,
  type FanoutTreeOptions,
} from './realtime/fanout/tree.js';
export type { ConnectRequest, ConnectResult } from './realtime/gateway/connect.js';
export {
  Gateway,
  type GatewayOptions,
} from './realtime/gateway/gateway.js';
export {
  bucketOf,
  type PartitionReport,
  type PartitionScope,
  type PingerLayout,
  partitionScope,
} from './realtime/keepalive/partitions.js';
export {
  MAX_PING_INTERVAL,
  MIN_PING_INTERVAL,
} from './realtime/keepalive/ping-interval.js';
export {
  Pinger,
  type PingerOptions,
  type PingReport,
  type Welcomer,
} from './realtime/keepalive/pinger.js';
export {
  cachedBuckets,
  type PartitionRun,
  type PingerInvoker,
  type PingerLayoutStore,
  PingerRuns,
  type PingerRunsOptions,
  type RunPlan,
} from './realtime/keepalive/runs.js';
export type { FrameLimitCounts } from './realtime/limits/frame-limit.js';
export {
  RATE_LIMITED_COMMANDS,
  type RateLimit,
  type RateLimitedCommand,
  type RateLimiter,
  type RateVerdict,
} from './realtime/limits/rate-limit.js';
export type {
  ConnectionApi,
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  SliceRead,
  SubscriberSlice,
  Subscription,
  SubscriptionAdd,
} from './realtime/ports.js';
export {
  DEFAULT_PRESENCE_INFO_LIMIT,
  type PresenceSettings,
} from './realtime/presence/commands.js';
export {
  PRESENCE_TOPIC,
  PresenceEvent,
  type PresenceEventValue,
  presenceEventOf,
  presenceMessage,
} from './realtime/presence/events.js';
export {
  checkPresence,
  DEFAULT_PRESENCE_TTL_SECONDS,
  joinChange,
  MAX_PRESENCE_ID_BYTES,
  MAX_PRESENCE_INFO_BYTES,
  type PresenceChange,
  type PresenceCheck,
  type PresenceJoin,
  type PresenceLeave,
  type PresenceLeft,
  type PresenceMember,
  type PresenceMembers,
  type PresenceReadOptions,
  type PresenceRefusal,
  type PresenceRefusalReason,
  type PresenceStore,
  presenceOf,
} from './realtime/presence/presence.js';
export {
  EXT_PROTOCOL,
  PLAIN_PROTOCOL,
  PUBSUB_CHANNEL,
} from './realtime/protocol.js';
