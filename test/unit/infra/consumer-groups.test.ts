import { describe, expect, it } from 'vitest';
import { type ConsumerGroupDefinition, consumerGroupsFor } from '../../../infra/deploy/consumers';
import { cloudFormation } from '../../../infra/deploy/template/cloudformation';
import {
  consumerFunctions,
  functionEnvironment,
} from '../../../infra/deploy/template/function-settings';
import { consumerPermissions } from '../../../infra/deploy/template/roles';
import { visibilityTimeoutOf } from '../../../infra/deploy/template/storage';

const orders: ConsumerGroupDefinition = {
  name: 'orders',
  topics: ['orders'],
  handler: 'functions/consumers/orders.handler',
  ackStore: true,
  timeout: 20,
  permissions: [
    { actions: ['dynamodb:UpdateItem'], resources: [{ 'Fn::GetAtt': ['OrdersTable', 'Arn'] }] },
  ],
};
const external: ConsumerGroupDefinition = { name: 'warehouse', topics: ['orders'] };

describe('a consumer group declared in one place', () => {
  it('gets a function with its queue as event source, only when it has a handler', () => {
    const fns = consumerFunctions([orders, external]);
    expect(Object.keys(fns)).toEqual(['orders']);
    expect(fns.orders).toEqual({
      handler: 'functions/consumers/orders.handler',
      role: 'OrdersRole',
      timeout: 20,
      events: [
        {
          sqs: {
            arn: { 'Fn::GetAtt': ['OrdersQueue', 'Arn'] },
            batchSize: 10,
            functionResponseType: 'ReportBatchItemFailures',
          },
        },
      ],
    });
  });

  it('gets a queue (visibility 6 × its timeout) and DLQ, its queue URL in every function, and a role of its own', () => {
    expect(visibilityTimeoutOf(orders)).toBe(120);
    expect(visibilityTimeoutOf(external)).toBe(180);
    const { Resources } = cloudFormation({
      prefix: 'p',
      functionName: (k) => `p-${k}`,
      consumerGroups: [...consumerGroupsFor({}), orders, external],
    });
    expect(Resources.OrdersQueue?.Properties.VisibilityTimeout).toBe(120);
    expect(Resources.WarehouseDlq).toBeDefined();
    expect(functionEnvironment('p', [orders]).LAMBDACABLE_QUEUE_ORDERS).toEqual({
      Ref: 'OrdersQueue',
    });
    // A queue-only group has no function, so no role.
    expect(Resources.WarehouseRole).toBeUndefined();
    const statements = JSON.stringify(Resources.OrdersRole?.Properties.Policies);
    expect(statements).toContain('"Resource":[{"Fn::GetAtt":["OrdersTable","Arn"]}]');
    expect(statements).toContain('AcksTable');
    expect(statements).not.toContain('BroadcastQueue');
  });

  it('reaches the acks table only with an ack store', () => {
    const tablesOf = (g: ConsumerGroupDefinition) =>
      consumerPermissions(g).flatMap((p) => ('table' in p ? [p.table] : []));
    expect(tablesOf(orders)).toEqual(['schemas', 'acks']);
    expect(tablesOf({ ...orders, ackStore: false })).toEqual(['schemas']);
  });

  it('deploys the example consumer only when asked', () => {
    expect(consumerGroupsFor({}).map((g) => g.name)).toEqual(['broadcast']);
    expect(consumerGroupsFor({ LAMBDACABLE_EXAMPLE_CONSUMER: 'true' }).map((g) => g.name)).toEqual([
      'broadcast',
      'audit',
    ]);
  });
});
