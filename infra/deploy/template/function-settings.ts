/**
 * What `serverless.yml` takes for its functions: the entries of the consumer groups'
 * functions, and the environment every function gets (table names and queue URLs, under the
 * variable names of `names.ts`).
 */

import { type ConsumerGroupDefinition, consumerGroupsFor } from '../consumers';
import { tables } from '../definitions';
import {
  DELIVER_FUNCTION_VARIABLE,
  dlqUrlVariable,
  queueLogicalIds,
  queueUrlVariable,
  RELAY_FAILURES_QUEUE,
  RELAY_FAILURES_URL_VARIABLE,
  roleLogicalId,
  type TableName,
  tableName,
  tableVariable,
} from '../names';
import type { Json } from './types';

/**
 * The `functions` entries of the consumer groups that have a handler: each consumes its
 * queue with partial batch responses, under its own role.
 */
export function consumerFunctions(
  groups: readonly ConsumerGroupDefinition[] = consumerGroupsFor(process.env),
): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const group of groups) {
    if (!group.handler) continue;
    out[group.name] = {
      handler: group.handler,
      role: roleLogicalId(group.name),
      ...(group.timeout ? { timeout: group.timeout } : {}),
      ...(group.memorySize ? { memorySize: group.memorySize } : {}),
      events: [
        {
          sqs: {
            arn: { 'Fn::GetAtt': [queueLogicalIds(group.name).queue, 'Arn'] },
            batchSize: group.batchSize ?? 10,
            functionResponseType: 'ReportBatchItemFailures',
          },
        },
      ],
    };
  }
  return out;
}

/** The environment every function gets: table names and queue URLs. */
export function functionEnvironment(
  prefix: string,
  groups: readonly ConsumerGroupDefinition[] = consumerGroupsFor(process.env),
): Record<string, Json> {
  const env: Record<string, Json> = {};
  for (const name of Object.keys(tables) as TableName[]) {
    env[tableVariable(name)] = tableName(prefix, name);
  }
  for (const group of groups) {
    env[queueUrlVariable(group.name)] = { Ref: queueLogicalIds(group.name).queue };
    env[dlqUrlVariable(group.name)] = { Ref: queueLogicalIds(group.name).dlq };
  }
  env[RELAY_FAILURES_URL_VARIABLE] = { Ref: RELAY_FAILURES_QUEUE };
  env[DELIVER_FUNCTION_VARIABLE] = `${prefix}-deliver`;
  return env;
}
