import { afterEach, describe, expect, it, vi } from 'vitest';
import { consumerGroupsFor } from '../../../infra/deploy/consumers';
import { tables } from '../../../infra/deploy/definitions';
import { queueUrlVariable, type TableName, tableVariable } from '../../../infra/deploy/names';
import { EXT, gatewayHarness, pubsub } from '../../helpers/gateway';

/** The consumer groups of this environment (read once, as a deployment's start reads them). */
const consumerGroups = consumerGroupsFor(process.env);

/** The environment serverless.yml gives a function, with `extra` on top. */
function lambdaEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'x',
    AWS_SECRET_ACCESS_KEY: 'x',
    AWS_LAMBDA_FUNCTION_NAME: 'lambdacable-test-broadcast',
    LAMBDACABLE_DELIVER_FUNCTION: 'lambdacable-test-deliver',
    ...extra,
  };
  for (const table of Object.keys(tables) as TableName[]) env[tableVariable(table)] = `t-${table}`;
  for (const g of consumerGroups) env[queueUrlVariable(g.name)] = `https://sqs/q-${g.name}`;
  return env;
}

describe('LAMBDACABLE_BROKER selects the broker of the deployed functions', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  it.each([
    [{}, 'DynamoBroker'],
    [{ LAMBDACABLE_BROKER: 'dynamodb' }, 'DynamoBroker'],
    [{ LAMBDACABLE_BROKER: 'legacy' }, 'LegacyBroker'],
  ])('with %o the broadcast consumer and the gateway use the %s', async (extra, expected) => {
    for (const [name, value] of Object.entries(lambdaEnv(extra))) vi.stubEnv(name, value);
    // A fresh composition root: it reads the environment once per instance.
    const runtime = await import('../../../functions/runtime');
    const match =
      expected === 'LegacyBroker'
        ? (await import('../../../lib/core')).LegacyBroker
        : (await import('../../../lib/aws')).DynamoBroker;
    expect(runtime.delivery().broker).toBeInstanceOf(match);
    expect(runtime.realtime().broker).toBeInstanceOf(match);
  });
});

describe('the legacy broker behind the gateway (AnyCable without a broker)', () => {
  it('delivers broadcasts without epoch or offset, rejects history, and still restores sessions', async () => {
    const t = gatewayHarness({ broker: 'legacy', config: { publicStreams: true } });
    const { api, gateway } = t;
    const jid = await t.token();
    await gateway.connect({ connectionId: 'c1', query: { jid }, protocols: EXT });
    await gateway.welcome('c1');
    const send = (frame: object) => t.send('c1', frame);
    await send({ command: 'subscribe', identifier: pubsub('news') });
    await t.publish('news', { n: 1 });
    const frames = () => t.frames('c1');
    // No stream_id, epoch or offset: there is no position to resume from.
    expect(frames().at(-1)).toEqual({ identifier: pubsub('news'), message: { n: 1 } });
    await send({ command: 'history', identifier: pubsub('news'), history: { since: 0 } });
    expect(frames().at(-1)).toEqual({ type: 'reject_history', identifier: pubsub('news') });

    // Sessions live in the session cache, not in the broker: a reconnect restores them.
    await gateway.disconnect('c1');
    await gateway.connect({ connectionId: 'c2', query: { jid, sid: 'sid-1' }, protocols: EXT });
    await gateway.welcome('c2');
    expect(api.framesOf('c2')).toContainEqual(expect.objectContaining({ restored: true }));
  });
});
