import { type InvokeCommand, LambdaClient, TooManyRequestsException } from '@aws-sdk/client-lambda';
import { describe, expect, it } from 'vitest';
import { LambdaTaskRunner } from '../../../../../lib/aws';
import { type FanoutTask, taskOutcomeOf } from '../../../../../lib/core';

const task: FanoutTask = { message: { stream: 'live', data: '"x"', offset: 1, epoch: 'e' } };

/**
 * A Lambda client whose `send` answers `answer` (a fault the emulator cannot produce on demand:
 * a throttled Invoke, a killed invocation), recording what it was sent.
 */
function clientAnswering(answer: () => Promise<unknown>) {
  const client = new LambdaClient({ region: 'us-east-1' });
  const sent: unknown[] = [];
  client.send = (async (command: unknown) => {
    sent.push(command);
    return answer();
  }) as LambdaClient['send'];
  return { client, sent };
}

const payload = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

async function outcomeOf(answer: () => Promise<unknown>) {
  const { client, sent } = clientAnswering(answer);
  const runner = new LambdaTaskRunner({ client, functionName: 'deliver' });
  const error = await runner.run(task).catch((e: unknown) => e);
  expect(sent).toHaveLength(1);
  expect((sent[0] as InvokeCommand).input.FunctionName).toBe('deliver');
  return taskOutcomeOf(error);
}

describe('LambdaTaskRunner: what became of a failed invocation', () => {
  it('refused (TooManyRequestsException): not started', async () => {
    const throttled = new TooManyRequestsException({ message: 'Rate exceeded', $metadata: {} });
    expect(await outcomeOf(() => Promise.reject(throttled))).toBe('not-started');
  });

  it('the handler threw: ended (it waited for its own sub-tasks)', async () => {
    const answer = {
      FunctionError: 'Unhandled',
      Payload: payload({ errorType: 'AwsResourceError', errorMessage: 'Query failed' }),
    };
    expect(await outcomeOf(async () => answer)).toBe('ended');
  });

  it.each([
    [
      'killed at its timeout',
      { errorType: 'Sandbox.Timedout', errorMessage: 'Task timed out after 120.00 seconds' },
    ],
    ['out of memory', { errorType: 'Runtime.OutOfMemory', errorMessage: 'Runtime exited' }],
    ['an older timeout answer', { errorMessage: '2026-12-07 Task timed out after 120.01 seconds' }],
  ])('%s: unknown (what it invoked may run on)', async (_what, error) => {
    const answer = { FunctionError: 'Unhandled', Payload: payload(error) };
    expect(await outcomeOf(async () => answer)).toBe('unknown');
  });

  it('no connection made (ECONNREFUSED): not started', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3002'), {
      code: 'ECONNREFUSED',
    });
    expect(await outcomeOf(() => Promise.reject(refused))).toBe('not-started');
  });

  it('no answer (a reset connection): unknown', async () => {
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    expect(await outcomeOf(() => Promise.reject(reset))).toBe('unknown');
  });

  it('answers the report of a task that ran', async () => {
    const report = {
      sent: 3,
      gone: 0,
      undelivered: 0,
      retried: 0,
      subscribers: 3,
      invocations: 1,
      maxPosts: 3,
      depth: 1,
    };
    const { client } = clientAnswering(async () => ({ Payload: payload(report) }));
    expect(await new LambdaTaskRunner({ client, functionName: 'deliver' }).run(task)).toEqual(
      report,
    );
  });
});
