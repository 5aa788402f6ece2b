/**
 * The messaging parts of the composition root: the event codec over the schema registry, the
 * stream relay, the consumer groups' handlers and the producer of broadcasts. Each is built
 * on first use, once per Lambda instance.
 */

import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import {
  type BatchConsumerOptions,
  type ConsumedMessage,
  consumeSqsBatch,
  DynamoAckStore,
  DynamoSchemaRegistry,
  OutboxProducer,
  OutboxRelay,
  SqsRelayParking,
} from '../../lib/aws';
import {
  AvroCodec,
  BROADCAST_TOPIC,
  BroadcastEvent,
  ConfigError,
  type EventType,
  LambdacableError,
  RemoteCommandEvent,
  type SchemaRegistry,
} from '../../lib/core';
import { part, runtime } from './instance';
import { addConsumerMetrics, metrics } from './metrics';

/**
 * Encodes and decodes events with the schema registry table, which no function writes: the
 * deploy registers the schemas they encode (`infra/deploy/schemas.ts`), so encoding looks an
 * id up (a `GetItem`) and an unregistered schema is an error, never a registration.
 */
export function codec(): AvroCodec {
  return part('codec', () => new AvroCodec(registeredSchemas()));
}

/** The schema registry table, read only: `register` looks the id of a schema up. */
export function registeredSchemas(): SchemaRegistry {
  return part('registeredSchemas', ({ dynamodb, tables }) => {
    const registry = new DynamoSchemaRegistry({ client: dynamodb, tableName: tables.schemas });
    return {
      register: async (subject, schema) => {
        const id = await registry.idOf(schema);
        if (id === undefined) {
          throw new LambdacableError(
            `the schema of ${subject} is not in ${tables.schemas}: the deploy registers it (infra/deploy/schemas.ts)`,
          );
        }
        return id;
      },
      getById: (id) => registry.getById(id),
    };
  });
}

/** The stream relay: outbox records → the queues of the groups subscribed to their topic. */
export function relay(): OutboxRelay {
  return part('relay', ({ sqs, queues, logger, relayFailuresQueue, settings }) => {
    const routes: Record<string, string[]> = {};
    for (const group of settings.groups) {
      for (const topic of group.topics)
        routes[topic] = [...(routes[topic] ?? []), queues[group.name]!];
    }
    return new OutboxRelay({
      sqs,
      routes,
      // A refused record (unreadable, oversize, SenderFault) is parked in relay-failures with
      // its item, and its shard goes on; relay:replay sends it again.
      onRefused: (error, sequenceNumber) =>
        logger.error('outbox record refused', { error, sequenceNumber }),
      ...(relayFailuresQueue
        ? { parking: new SqsRelayParking({ sqs, queueUrl: relayFailuresQueue }) }
        : {}),
    });
  });
}

/** `consumeSqsBatch`'s `deadLetter` option for `group`: its DLQ, when the environment names it. */
export function deadLetterOf(group: string): { deadLetter?: BatchConsumerOptions['deadLetter'] } {
  const { sqs, deadLetterQueues } = runtime();
  const url = deadLetterQueues[group];
  return url ? { deadLetter: { sqs, queueUrl: () => url } } : {};
}

/**
 * The Lambda handler of a consumer group declared in `infra/deploy/consumers.ts`: each SQS
 * record becomes a {@link ConsumedMessage} for `handle` (`consumeSqsBatch`), with the group's
 * ack state in the `acks` table when it declares `ackStore`, a transiently failed message's
 * redelivery delayed by `backoffSeconds` (2 s doubling, at most 120), a permanently failed one
 * parked in the group's DLQ at once, and the `consumedMessages`, `failedMessages` and
 * `parkedMessages` metrics.
 */
export function consumer(
  group: string,
  handle: (message: ConsumedMessage) => Promise<void>,
): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return async (event) => {
    const { logger, sqs, queues, dynamodb, tables, config, settings } = runtime();
    const definition = settings.groups.find((g) => g.name === group);
    if (!definition) {
      throw new ConfigError(`no consumer group named ${group} in infra/deploy/consumers.ts`, {
        variable: 'consumerGroups',
      });
    }
    const response = await consumeSqsBatch(event, handle, {
      group,
      ...(definition.ackStore
        ? {
            ackStore: new DynamoAckStore({
              client: dynamodb,
              tableName: tables.acks,
              ttlSeconds: config.ackTtl,
            }),
          }
        : {}),
      logger,
      visibility: { sqs, queueUrl: () => queues[group]! },
      ...deadLetterOf(group),
    });
    const m = metrics();
    const failed = response.batchItemFailures.length;
    addConsumerMetrics(m, {
      consumed: event.Records.length - failed - response.parked,
      failed,
      parked: response.parked,
    });
    m.publishStoredMetrics();
    return response;
  };
}

/**
 * Writes broadcasts to the outbox (the log), never to SQS directly; refuses, before the
 * write, a broadcast or command that could not reach a subscriber (SQS body, frame limit).
 */
export function producer(): OutboxProducer {
  return part(
    'producer',
    ({ dynamodb, tables }) =>
      new OutboxProducer({
        client: dynamodb,
        tableName: tables.outbox,
        topic: BROADCAST_TOPIC,
        eventTypes: [BroadcastEvent, RemoteCommandEvent] as EventType<unknown>[],
      }),
  );
}
