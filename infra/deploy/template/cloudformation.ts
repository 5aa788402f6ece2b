/**
 * CloudFormation for `serverless.yml`, built from the same definitions as the local
 * bootstrap: the tables, the consumer group queues with their DLQs, the stream relay's
 * failure queue (`storage.ts`), the client frames queue and the `$default` route that fills it
 * (`websocket/frames.ts`), one least-privilege IAM role per function (`roles.ts`), and
 * the alarms and dashboard (`monitoring/alarms.ts`).
 */

import { type ConsumerGroupDefinition, consumerGroupsFor } from '../consumers';
import { DEFAULT_MONITORING, type MonitoringSettings, monitoring } from '../monitoring/alarms';
import type { SecretParameters } from '../secrets';
import { framesResources } from '../websocket/frames';
import { roleResources } from './roles';
import { queueResources, tableResources } from './storage';
import type { Json, Resource } from './types';

/** The relay's metric of records it cannot send (alarmed at 1). */
export const RELAY_REFUSED_METRIC = 'relayRefusedRecords';

/** Options of {@link cloudFormation}. */
export interface CloudFormationOptions {
  /** Physical name prefix, `<service>-<stage>`. */
  readonly prefix: string;
  /**
   * The stage: `ManageConnections` is granted on this stage's connections only.
   * @default every stage (`*`)
   */
  readonly stage?: string;
  /** The deployed function name of a function key, e.g. `<service>-<stage>-<key>`. */
  readonly functionName: (key: string) => string;
  readonly consumerGroups?: readonly ConsumerGroupDefinition[];
  /** Alarm thresholds and where they go. @default {@link DEFAULT_MONITORING} */
  readonly monitoring?: MonitoringSettings;
  /**
   * Where each secret is stored (`custom.secrets`): the functions that read one may read
   * exactly that parameter. @default {@link defaultSecretParameters} of the stage
   */
  readonly secrets?: SecretParameters;
}

/**
 * The `resources` section: tables, queues, the relay failure queue, the function roles, and
 * the alarms, their topic and the dashboard (`monitoring/alarms.ts`).
 */
export function cloudFormation(options: CloudFormationOptions): {
  Resources: Record<string, Resource>;
  Outputs: Record<string, Json>;
} {
  const groups = options.consumerGroups ?? consumerGroupsFor(process.env);
  const queues = queueResources(options.prefix, groups);
  const watched = monitoring({
    prefix: options.prefix,
    functionName: options.functionName,
    groups,
    settings: options.monitoring ?? DEFAULT_MONITORING,
    relayRefusedMetric: RELAY_REFUSED_METRIC,
  });
  const frames = framesResources(options.prefix);
  return {
    Resources: {
      ...tableResources(options.prefix),
      ...queues.Resources,
      ...frames.Resources,
      ...roleResources(options, groups),
      ...watched.Resources,
    },
    Outputs: { ...queues.Outputs, ...frames.Outputs, ...watched.Outputs },
  };
}
