import { createHash } from 'node:crypto';
import {
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type avro from 'avsc';
import {
  assertBackwardCompatible,
  canonicalSchema,
  type SchemaRegistry,
} from '../../../events/schema-registry.js';
import { type AwsResourceError, SchemaCompatibilityError } from '../../../kernel/errors.js';
import { awsCall } from '../call.js';

/**
 * A schema registry in the `schemas` table. Items (`pk` / `sk`):
 * `id#<n>` / `schema` (the canonical schema), `hash#<sha256>` / `id`,
 * `subject#<name>` / `v#<version>` (one per version), `counter` / `counter` (next id).
 * Registering the same schema concurrently yields one id: the hash item is written
 * conditionally, and a loser reads the winner's id.
 */
export class DynamoSchemaRegistry implements SchemaRegistry {
  private readonly cache = new Map<number, avro.Schema>();

  constructor(private readonly options: { client: DynamoDBClient; tableName: string }) {}

  async register(subject: string, schema: avro.Schema): Promise<number> {
    const canonical = canonicalSchema(schema);
    const hash = createHash('sha256').update(canonical).digest('hex');
    for (let attempt = 0; attempt < 5; attempt++) {
      const latest = await this.latestVersion(subject);
      if (latest?.hash === hash) return latest.id;
      const existingId = await this.idOfHash(hash);
      if (latest) {
        const previous = await this.getById(latest.id);
        if (previous) assertBackwardCompatible(subject, previous, JSON.parse(canonical));
      }
      const id = existingId ?? (await this.nextId());
      const version = (latest?.version ?? 0) + 1;
      try {
        await this.send(
          'TransactWriteItems',
          () =>
            this.options.client.send(
              new TransactWriteItemsCommand({
                TransactItems: [
                  {
                    Put: {
                      TableName: this.options.tableName,
                      Item: {
                        pk: { S: `subject#${subject}` },
                        sk: { S: `v#${String(version).padStart(6, '0')}` },
                        id: { N: String(id) },
                        hash: { S: hash },
                      },
                      ConditionExpression: 'attribute_not_exists(pk)',
                    },
                  },
                  ...(existingId === undefined
                    ? [
                        {
                          Put: {
                            TableName: this.options.tableName,
                            Item: {
                              pk: { S: `hash#${hash}` },
                              sk: { S: 'id' },
                              id: { N: String(id) },
                            },
                            ConditionExpression: 'attribute_not_exists(pk)',
                          },
                        },
                        {
                          Put: {
                            TableName: this.options.tableName,
                            Item: {
                              pk: { S: `id#${id}` },
                              sk: { S: 'schema' },
                              schema: { S: canonical },
                              subject: { S: subject },
                            },
                          },
                        },
                      ]
                    : []),
                ],
              }),
            ),
          subject,
        );
        return id;
      } catch (error) {
        // A concurrent registration took the version or the hash: look again.
        if (!((error as AwsResourceError).cause instanceof TransactionCanceledException))
          throw error;
      }
    }
    throw new SchemaCompatibilityError(
      `could not register a schema for ${subject}: too much contention`,
      {
        subject,
      },
    );
  }

  /**
   * The id of `schema` if it is registered (under any subject), without registering it: one
   * `GetItem`, so a reader that must not write the registry can still encode.
   */
  async idOf(schema: avro.Schema): Promise<number | undefined> {
    const hash = createHash('sha256').update(canonicalSchema(schema)).digest('hex');
    return this.idOfHash(hash, false);
  }

  /**
   * The schema with `id`: an eventually consistent `GetItem` (half the read's cost), and on a
   * miss a strongly consistent one, since a schema registered a moment ago may not have
   * reached the replica that answered. `undefined` only when that second read misses too.
   */
  async getById(id: number): Promise<avro.Schema | undefined> {
    const cached = this.cache.get(id);
    if (cached) return cached;
    const text = (await this.readSchema(id, false)) ?? (await this.readSchema(id, true));
    if (!text) return undefined;
    const schema = JSON.parse(text) as avro.Schema;
    this.cache.set(id, schema);
    return schema;
  }

  /** The canonical schema text of `id`, as one read sees it. */
  private async readSchema(id: number, consistent: boolean): Promise<string | undefined> {
    const out = await this.send(
      'GetItem',
      () =>
        this.options.client.send(
          new GetItemCommand({
            TableName: this.options.tableName,
            Key: { pk: { S: `id#${id}` }, sk: { S: 'schema' } },
            ConsistentRead: consistent,
          }),
        ),
      `id#${id}`,
    );
    return out.Item?.schema?.S || undefined;
  }

  private async latestVersion(
    subject: string,
  ): Promise<{ version: number; id: number; hash: string } | undefined> {
    const out = await this.send(
      'Query',
      () =>
        this.options.client.send(
          new QueryCommand({
            TableName: this.options.tableName,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
            ExpressionAttributeValues: { ':pk': { S: `subject#${subject}` }, ':v': { S: 'v#' } },
            ScanIndexForward: false,
            Limit: 1,
            ConsistentRead: true,
          }),
        ),
      subject,
    );
    const item = out.Items?.[0];
    if (!item) return undefined;
    return {
      version: Number(item.sk?.S?.slice(2)),
      id: Number(item.id?.N),
      hash: item.hash?.S ?? '',
    };
  }

  private async idOfHash(hash: string, consistent = true): Promise<number | undefined> {
    const out = await this.send(
      'GetItem',
      () =>
        this.options.client.send(
          new GetItemCommand({
            TableName: this.options.tableName,
            Key: { pk: { S: `hash#${hash}` }, sk: { S: 'id' } },
            ConsistentRead: consistent,
          }),
        ),
      hash,
    );
    const id = out.Item?.id?.N;
    return id === undefined ? undefined : Number(id);
  }

  private async nextId(): Promise<number> {
    const out = await this.send(
      'UpdateItem',
      () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: { pk: { S: 'counter' }, sk: { S: 'counter' } },
            UpdateExpression: 'ADD nextId :one',
            ExpressionAttributeValues: { ':one': { N: '1' } },
            ReturnValues: 'UPDATED_NEW',
          }),
        ),
      'counter',
    );
    return Number(out.Attributes?.nextId?.N);
  }

  private send<T>(operation: string, fn: () => Promise<T>, id: string): Promise<T> {
    return awsCall(operation, this.options.tableName, [id], fn);
  }
}
