import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { DEFAULT_RETRY_SCHEDULE } from '../../lib/messaging/failures';
import { type ConsumerGroupDefinition, consumerGroupsFor } from '../deploy/consumers';
import { DEFAULT_FUNCTION_TIMEOUT, DLQ_RETENTION_SECONDS, tables } from '../deploy/definitions';
import {
  framesQueueNames,
  queueNames,
  relayFailuresQueueName,
  type TableName,
  tableName,
} from '../deploy/names';
import { registerSchemas } from '../deploy/schemas';
import { FRAMES_MAX_RECEIVE_COUNT } from '../deploy/websocket/frames';

/** A created consumer group queue. */
export interface LocalQueue {
  readonly url: string;
  readonly arn: string;
  readonly dlqUrl: string;
  readonly dlqArn: string;
  readonly topics: readonly string[];
  readonly maxReceiveCount: number;
}

/** What {@link createLocalResources} made. */
export interface LocalResources {
  readonly tables: Readonly<Record<TableName, string>>;
  readonly queues: Readonly<Record<string, LocalQueue>>;
  /** The outbox table's stream ARN. */
  readonly outboxStreamArn: string | undefined;
  /** The relay failures queue (the stream relay's on-failure destination), with an SQS client. */
  readonly relayFailuresUrl: string | undefined;
  /** The client frames queue (the `$default` route's), with an SQS client. */
  readonly frames: LocalQueue | undefined;
}

/**
 * Creates every table of `infra/` (and registers the schemas the functions encode with, as
 * the deploy does) and, when an SQS client is given, every consumer group queue with its DLQ
 * and the relay failures queue, on the given clients. Idempotent: existing resources are kept.
 */
export async function createLocalResources(options: {
  dynamodb: DynamoDBClient;
  sqs?: SQSClient;
  prefix?: string;
  consumerGroups?: readonly ConsumerGroupDefinition[];
}): Promise<LocalResources> {
  const prefix = options.prefix ?? 'lambdacable';
  const names = {} as Record<TableName, string>;
  let outboxStreamArn: string | undefined;
  for (const table of Object.keys(tables) as TableName[]) {
    names[table] = tableName(prefix, table);
    const arn = await createTable(options.dynamodb, names[table], table);
    if (table === 'outbox') outboxStreamArn = arn;
  }
  // As `serverless deploy` does after the stack is up: no function writes the registry.
  await registerSchemas(options.dynamodb, names.schemas);
  const queues: Record<string, LocalQueue> = {};
  let relayFailuresUrl: string | undefined;
  let frames: LocalQueue | undefined;
  if (options.sqs) {
    frames = await createFramesQueue(options.sqs, prefix);
    for (const group of options.consumerGroups ?? consumerGroupsFor(process.env)) {
      queues[group.name] = await createGroupQueue(options.sqs, prefix, group);
    }
    // As infra/deploy/storage.ts defines it: a standard queue, 14 days.
    relayFailuresUrl = await createQueue(options.sqs, relayFailuresQueueName(prefix), {
      MessageRetentionPeriod: String(DLQ_RETENTION_SECONDS),
    });
  }
  return { tables: names, queues, outboxStreamArn, relayFailuresUrl, frames };
}

async function createTable(
  client: DynamoDBClient,
  name: string,
  table: TableName,
): Promise<string | undefined> {
  const { ttlAttribute, ...definition } = tables[table];
  const input = {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    ...structuredClone(definition),
    ...(definition.StreamSpecification
      ? { StreamSpecification: { StreamEnabled: true, ...definition.StreamSpecification } }
      : {}),
  } as CreateTableCommandInput;
  try {
    await client.send(new CreateTableCommand(input));
    if (ttlAttribute) {
      await client.send(
        new UpdateTimeToLiveCommand({
          TableName: name,
          TimeToLiveSpecification: { AttributeName: ttlAttribute, Enabled: true },
        }),
      );
    }
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  const described = await client.send(new DescribeTableCommand({ TableName: name }));
  return described.Table?.LatestStreamArn;
}

/** A group's FIFO queue and its DLQ, as infra/deploy/template/storage.ts declares them. */
function createGroupQueue(
  sqs: SQSClient,
  prefix: string,
  group: ConsumerGroupDefinition,
): Promise<LocalQueue> {
  return createFifoQueue(sqs, queueNames(prefix, group.name), {
    visibilityTimeout: group.visibilityTimeout ?? 60,
    maxReceiveCount: group.maxReceiveCount ?? DEFAULT_RETRY_SCHEDULE.maxReceiveCount,
    topics: group.topics,
  });
}

/** The client frames queue and its DLQ, as infra/deploy/websocket/frames.ts declares them. */
function createFramesQueue(sqs: SQSClient, prefix: string): Promise<LocalQueue> {
  return createFifoQueue(sqs, framesQueueNames(prefix), {
    visibilityTimeout: 6 * DEFAULT_FUNCTION_TIMEOUT,
    maxReceiveCount: FRAMES_MAX_RECEIVE_COUNT,
    topics: [],
  });
}

/** A FIFO queue whose redrive policy moves a message to its FIFO DLQ, both created. */
async function createFifoQueue(
  sqs: SQSClient,
  names: { queue: string; dlq: string },
  settings: { visibilityTimeout: number; maxReceiveCount: number; topics: readonly string[] },
): Promise<LocalQueue> {
  const { maxReceiveCount } = settings;
  const dlqUrl = await createQueue(sqs, names.dlq, {
    FifoQueue: 'true',
    MessageRetentionPeriod: String(DLQ_RETENTION_SECONDS),
  });
  const dlqArn = await queueArn(sqs, dlqUrl);
  const url = await createQueue(sqs, names.queue, {
    FifoQueue: 'true',
    VisibilityTimeout: String(settings.visibilityTimeout),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount }),
  });
  return {
    url,
    arn: await queueArn(sqs, url),
    dlqUrl,
    dlqArn,
    topics: settings.topics,
    maxReceiveCount,
  };
}

async function createQueue(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<string> {
  const out = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  if (!out.QueueUrl) throw new Error(`CreateQueue ${name} returned no QueueUrl`);
  return out.QueueUrl;
}

async function queueArn(sqs: SQSClient, url: string): Promise<string> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
  );
  const arn = out.Attributes?.QueueArn;
  if (!arn) throw new Error(`queue ${url} has no QueueArn`);
  return arn;
}
