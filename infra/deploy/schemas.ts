/**
 * The deploy step that registers the schemas the functions encode with: `serverless deploy`
 * runs it after the stack is up (infra/deploy/schemas-plugin.cjs), `npm start` and the test
 * stacks when they create the tables (infra/local/resources.ts). No function's role writes the
 * schema registry: the internet-facing `httpBroadcast` only looks the ids up.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoSchemaRegistry } from '../../lib/aws';
import {
  AvroCodec,
  BroadcastEvent,
  type EventType,
  PresenceEvent,
  RemoteCommandEvent,
} from '../../lib/core';

/** The event types the functions encode: `POST /_broadcast`'s, and the presence store's. */
export const REGISTERED_EVENT_TYPES: readonly EventType<unknown>[] = [
  BroadcastEvent,
  RemoteCommandEvent,
  PresenceEvent,
] as EventType<unknown>[];

/**
 * Registers each type's schema (subject = type name) in the schemas table `tableName`;
 * idempotent. Returns type name → schema id.
 */
export async function registerSchemas(
  client: DynamoDBClient,
  tableName: string,
  types: readonly EventType<unknown>[] = REGISTERED_EVENT_TYPES,
): Promise<Record<string, number>> {
  const codec = new AvroCodec(new DynamoSchemaRegistry({ client, tableName }));
  const ids: Record<string, number> = {};
  for (const type of types) ids[type.name] = await codec.register(type);
  return ids;
}
