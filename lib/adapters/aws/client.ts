import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Clock } from '../../kernel/clock.js';
import { LambdacableError } from '../../kernel/errors.js';
import type { Client, CloseableProducer, Consumer } from '../../messaging/types.js';
import { OutboxProducer } from './dynamodb/outbox-producer.js';
import { SqsConsumer, type SqsConsumerOptions } from './sqs/consumer.js';

/** Options of {@link AwsClient}. */
export interface AwsClientOptions {
  readonly dynamodb: DynamoDBClient;
  readonly sqs: SQSClient;
  /** The outbox table every producer writes to. */
  readonly outboxTable: string;
  /** Application name → its topic. */
  readonly applications: Readonly<Record<string, { readonly topic: string }>>;
  /** Consumer group name → its queue URL. */
  readonly queues: Readonly<Record<string, string>>;
  /** Consumer tuning. */
  readonly consumer?: Omit<SqsConsumerOptions, 'sqs' | 'queueUrl'>;
  readonly clock?: Clock;
}

/**
 * The {@link Client} on AWS: producers write to the outbox (the relay delivers to SQS),
 * consumers long-poll their group's SQS FIFO queue.
 */
export class AwsClient implements Client {
  constructor(private readonly options: AwsClientOptions) {}

  newProducer(appName: string): CloseableProducer {
    const app = this.options.applications[appName];
    if (!app) throw new LambdacableError(`unknown application: ${appName}, configure its topic`);
    return new OutboxProducer({
      client: this.options.dynamodb,
      tableName: this.options.outboxTable,
      topic: app.topic,
      ...(this.options.clock ? { clock: this.options.clock } : {}),
    });
  }

  newConsumer(appName: string, consumerName: string): Consumer {
    if (!this.options.applications[appName]) {
      throw new LambdacableError(`unknown application: ${appName}, configure its topic`);
    }
    const queueUrl = this.options.queues[consumerName];
    if (!queueUrl) {
      throw new LambdacableError(`unknown consumer group: ${consumerName}, configure its queue`);
    }
    return new SqsConsumer({ ...this.options.consumer, sqs: this.options.sqs, queueUrl });
  }
}
