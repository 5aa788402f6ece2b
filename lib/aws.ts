/**
 * `lambdacable/aws`: the adapters on the AWS SDK v3: DynamoDB outbox, producer, schema
 * registry, broker, connections, presence and ack store; the SQS relay and consumers; the API Gateway
 * management API; the pinger's layout store and its Lambda invoker; the replay of relay
 * failures.
 */
export {
  ApiGatewayConnectionApi,
  type ApiGatewayConnectionApiOptions,
} from './adapters/aws/apigateway/connection-api.js';
export { recordAwsCalls } from './adapters/aws/call-log.js';
export {
  AwsClient,
  type AwsClientOptions,
} from './adapters/aws/client.js';
export { DynamoAckStore, type DynamoAckStoreOptions } from './adapters/aws/dynamodb/ack-store.js';
export {
  DynamoBroker,
  type DynamoBrokerOptions,
} from './adapters/aws/dynamodb/broker.js';
export {
  BUCKET_INDEX,
  DynamoConnectionStore,
  type DynamoConnectionStoreOptions,
  IDENTITY_INDEX,
  STREAM_INDEX,
} from './adapters/aws/dynamodb/connections.js';
export {
  DynamoHistoryReader,
  type DynamoHistoryReaderOptions,
} from './adapters/aws/dynamodb/history.js';
export {
  createOutbox,
  DynamoOutbox,
  type DynamoOutboxOptions,
  MAX_ITEM_BYTES,
  writeToOutbox,
} from './adapters/aws/dynamodb/outbox.js';
export {
  OutboxProducer,
  type OutboxProducerOptions,
} from './adapters/aws/dynamodb/outbox-producer.js';
export {
  DynamoPingerLayoutStore,
  type DynamoPingerLayoutStoreOptions,
} from './adapters/aws/dynamodb/pinger-layout.js';
export {
  DynamoPresenceStore,
  type DynamoPresenceStoreOptions,
} from './adapters/aws/dynamodb/presence.js';
export {
  DynamoRateLimiter,
  type DynamoRateLimiterOptions,
} from './adapters/aws/dynamodb/rate-limiter.js';
export {
  DynamoRequestIdStore,
  type DynamoRequestIdStoreOptions,
} from './adapters/aws/dynamodb/request-ids.js';
export {
  DynamoRevocationStore,
  type DynamoRevocationStoreOptions,
} from './adapters/aws/dynamodb/revocations.js';
export { DynamoSchemaRegistry } from './adapters/aws/dynamodb/schema-registry.js';
export {
  DynamoSessionCache,
  type DynamoSessionCacheOptions,
} from './adapters/aws/dynamodb/sessions.js';
export {
  LambdaPingerInvoker,
  type LambdaPingerInvokerOptions,
} from './adapters/aws/lambda/pinger-invoker.js';
export {
  LambdaTaskRunner,
  type LambdaTaskRunnerOptions,
} from './adapters/aws/lambda/task-runner.js';
export {
  parseRelayFailure,
  type RelayFailure,
  type StreamFailureRecord,
  streamFailureRecord,
} from './adapters/aws/relay/failure-record.js';
export {
  isParkedRecordBody,
  PARKED_RECORD_KIND,
  type ParkedRelayRecord,
  parkedRecordBody,
  parseParkedRecord,
  type RelayParking,
  SqsRelayParking,
} from './adapters/aws/relay/parking.js';
export {
  deduplicationId,
  HASHED_ID_PREFIX,
  messageGroupId,
  OutboxRelay,
  type OutboxRelayOptions,
  type RelayResult,
} from './adapters/aws/relay/relay.js';
export {
  type RelayReplayOptions,
  type RelayReplayReport,
  type ReplayRelayFailuresOptions,
  replayParkedRecord,
  replayRelayFailure,
  replayRelayFailures,
} from './adapters/aws/relay/replay.js';
export { AwsSecrets, type AwsSecretsOptions } from './adapters/aws/secrets.js';
export {
  type BatchConsumerOptions,
  type ConsumedMessage,
  type ConsumeResult,
  consumeSqsBatch,
  NackError,
} from './adapters/aws/sqs/batch-consumer.js';
export {
  SqsConsumer,
  type SqsConsumerOptions,
} from './adapters/aws/sqs/consumer.js';
export {
  PARKED_ATTRIBUTES,
  type ParkedMessage,
  parkInDeadLetterQueue,
} from './adapters/aws/sqs/dead-letter.js';
