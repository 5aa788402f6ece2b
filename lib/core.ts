/**
 * `lambdacable`: the pure core. Messaging (AckManager, Message, Producer/Consumer ports),
 * events (defineEvent, EventTopics, Avro codec, sender), the broker and gateway logic and
 * the errors. Nothing here imports the AWS SDK.
 */

export { MemoryRevocationStore } from './adapters/memory/revocations.js';
export { LegacyBroker } from './broker/legacy.js';
export { BROKER_ADAPTERS, type BrokerAdapter } from './broker/settings.js';
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
export type { RevocationStore, RevocationTarget, RevocationTimes } from './realtime/auth/ports.js';
export {
  identityStreamTarget,
  revocationKey,
  sessionStreamTarget,
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
  checkBroadcast,
  checkRemoteCommand,
  type RemoteCommand,
  RemoteCommandEvent,
} from './realtime/broadcasts/events.js';
export {
  type BroadcastRequestItem,
  hasBroadcastKey,
  parseBroadcastRequest,
  parseIdempotencyKey,
} from './realtime/broadcasts/http-request.js';
export {
  type DisconnectReader,
  type ItemOrigin,
  MAX_ORDERED_STREAMS,
  type OrderedDisconnect,
  orderedDisconnect,
  withOrderedDisconnects,
} from './realtime/broadcasts/ordered-disconnect.js';
export type { RequestIdStore } from './realtime/broadcasts/ports.js';
export { requestEventIds, requestFingerprint } from './realtime/broadcasts/request-ids.js';
export {
  type ComposeRealtimeOptions,
  composeRealtime,
  type PingerSettings,
  type Realtime,
} from './realtime/compose.js';
export { configFromEnv, defaultGatewayConfig, type GatewayConfig } from './realtime/config.js';
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
export type { FanoutTask, FanoutTaskReport, FanoutTaskRunner } from './realtime/fanout/ports.js';
export {
  DeadlinePassedError,
  FanoutTaskError,
  type FanoutTasksOptions,
  FanoutTree,
  type FanoutTreeOptions,
  FENCE_MS,
  LEVEL_RESERVE_MS,
  ROOT_BUDGET_MS,
  TaskInvocationError,
  type TaskOutcome,
  taskOutcomeOf,
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
export { Pinger, type PingerOptions, type PingReport } from './realtime/keepalive/pinger.js';
export type {
  PartitionRun,
  PingerInvoker,
  PingerLayoutStore,
  Welcomer,
} from './realtime/keepalive/ports.js';
export {
  cachedBuckets,
  PingerRuns,
  type PingerRunsOptions,
  type RunPlan,
} from './realtime/keepalive/runs.js';
export type { FrameLimitCounts } from './realtime/limits/frame-limit.js';
export type { RateLimit, RateLimiter, RateVerdict } from './realtime/limits/ports.js';
export { RATE_LIMITED_COMMANDS, type RateLimitedCommand } from './realtime/limits/rate-limit.js';
export type {
  ConnectionApi,
  ConnectionChange,
  ConnectionRecord,
  ConnectionStore,
  IndexProbe,
  SliceRead,
  SubscriberSlice,
  Subscription,
  SubscriptionAdd,
} from './realtime/ports.js';
export {
  PRESENCE_TOPIC,
  PresenceEvent,
  type PresenceEventValue,
  presenceEventOf,
  presenceMessage,
} from './realtime/presence/events.js';
export type {
  PresenceChange,
  PresenceJoin,
  PresenceLeave,
  PresenceLeft,
  PresenceMember,
  PresenceMembers,
  PresenceStore,
} from './realtime/presence/ports.js';
export {
  checkPresence,
  joinChange,
  MAX_PRESENCE_ID_BYTES,
  MAX_PRESENCE_INFO_BYTES,
  type PresenceCheck,
  type PresenceReadOptions,
  type PresenceRefusal,
  type PresenceRefusalReason,
  presenceOf,
} from './realtime/presence/presence.js';
export {
  DEFAULT_PRESENCE_INFO_LIMIT,
  DEFAULT_PRESENCE_TTL_SECONDS,
  type PresenceSettings,
} from './realtime/presence/settings.js';
export {
  EXT_PROTOCOL,
  PLAIN_PROTOCOL,
  PUBSUB_CHANNEL,
} from './realtime/protocol.js';
