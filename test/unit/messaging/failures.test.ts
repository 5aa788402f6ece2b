import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerGroupsFor } from '../../../infra/deploy/consumers';
import { queueLogicalIds } from '../../../infra/deploy/names';
import { cloudFormation } from '../../../infra/deploy/template/cloudformation';
import { NackError } from '../../../lib/aws';
import {
  AwsResourceError,
  backoffSeconds,
  classifyBatchEntry,
  classifyFailure,
  DEFAULT_RETRY_SCHEDULE,
  DecodeError,
  LimitExceededError,
  MessageFormatError,
  MIN_RETRY_WINDOW_SECONDS,
  RELAY_MAX_RETRY_ATTEMPTS,
  RELAY_RETRY_DELAYS_MS,
  relayRetryWindowSeconds,
  retryWindowSeconds,
  ThrottledError,
  UnknownEventTypeError,
} from '../../../lib/core';
import { type LoadBalancer, loadBalancer } from '../../helpers/outage';

const syntaxError = (() => {
  try {
    JSON.parse('{bad json');
  } catch (error) {
    return error;
  }
})();

/** The SDK's shape of a throttled call: a client fault by HTTP status, transient all the same. */
function throttling(): Error {
  const error = new Error('Rate of requests exceeds the allowed throughput');
  error.name = 'ThrottlingException';
  Object.assign(error, { $metadata: { httpStatusCode: 400 }, $fault: 'client' });
  return error;
}

describe('classifyFailure', () => {
  it('calls a message that can never be handled permanent: undecodable, unknown type, bad JSON, over a limit', () => {
    expect(classifyFailure(new MessageFormatError('message body is not JSON'))).toBe('permanent');
    expect(classifyFailure(new DecodeError('unknown magic byte: 110, expected 0'))).toBe(
      'permanent',
    );
    expect(classifyFailure(new UnknownEventTypeError('Mystery'))).toBe('permanent');
    expect(classifyFailure(syntaxError)).toBe('permanent');
    expect(
      classifyFailure(
        new LimitExceededError('too big', { what: 'payload', bytes: 2, limit: 1, kind: 'payload' }),
      ),
    ).toBe('permanent');
  });

  it('looks through the cause chain: a nack whose reason is a decode error is permanent', () => {
    const nack = new NackError('m-1', new DecodeError('undecodable payload for schema 3'));
    expect(classifyFailure(nack)).toBe('permanent');
    const wrapped = new Error('handler failed', { cause: syntaxError });
    expect(classifyFailure(wrapped)).toBe('permanent');
  });

  it('calls throttling, service errors and anything unknown transient', () => {
    expect(classifyFailure(throttling())).toBe('transient');
    expect(classifyFailure(new ThrottledError('throttled', { resource: 't' }))).toBe('transient');
    expect(
      classifyFailure(
        new AwsResourceError('GetItem failed', { resource: 't', cause: throttling() }),
      ),
    ).toBe('transient');
    const internal = new Error('We encountered an internal error');
    internal.name = 'InternalServerError';
    expect(classifyFailure(internal)).toBe('transient');
    const timeout = new Error('socket hang up');
    timeout.name = 'TimeoutError';
    expect(classifyFailure(timeout)).toBe('transient');
    expect(classifyFailure(new Error('boom'))).toBe('transient');
    expect(classifyFailure('nack')).toBe('transient');
    expect(classifyFailure(undefined)).toBe('transient');
    expect(classifyFailure(new NackError('m-2', 'deferred: too little time left'))).toBe(
      'transient',
    );
  });

  it('survives a cause cycle', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(classifyFailure(a)).toBe('transient');
  });
});

/** What a real SDK client throws for one call (no retry) to DynamoDB and to SQS at `endpoint`. */
async function sdkErrors(endpoint: string): Promise<(Error & { $metadata?: object })[]> {
  const config = {
    endpoint,
    region: 'us-east-1',
    maxAttempts: 1,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  };
  const calls = [
    () =>
      new DynamoDBClient(config).send(
        new GetItemCommand({ TableName: 'schemas', Key: { pk: { S: 'id#1' } } }),
      ),
    () => new SQSClient(config).send(new ReceiveMessageCommand({ QueueUrl: `${endpoint}/q.fifo` })),
  ];
  const errors = [];
  for (const call of calls)
    errors.push(
      await call().then(
        () => undefined,
        (e: Error) => e,
      ),
    );
  return errors.map((e) => {
    if (!e) throw new Error(`a call through ${endpoint} succeeded`);
    return e;
  });
}

describe('classifyFailure: by what failed, not by class name', () => {
  let balancer: LoadBalancer;
  beforeAll(async () => {
    balancer = await loadBalancer();
  });
  afterAll(() => balancer.close());

  it('calls the SDK error for a 503 with an HTML body transient (a SyntaxError), wrapped or not (real DynamoDB and SQS clients, a loopback load balancer)', async () => {
    balancer.status = 503;
    const errors = await sdkErrors(balancer.endpoint);
    expect(balancer.refused).toBe(2);
    for (const error of errors) {
      expect(error).toBeInstanceOf(SyntaxError);
      expect(error.message).toMatch(/Deserialization error/);
      expect(error.$metadata).toMatchObject({ httpStatusCode: 503 });
      expect(classifyFailure(error)).toBe('transient');
      expect(
        classifyFailure(new AwsResourceError('GetItem failed', { resource: 't', cause: error })),
      ).toBe('transient');
      expect(classifyFailure(new NackError('m-3', error))).toBe('transient');
    }
  });

  it('never blames the message for a service answer it could not parse: an HTML 403 from a proxy is transient too', async () => {
    balancer.status = 403;
    for (const error of await sdkErrors(balancer.endpoint)) {
      expect(error).toBeInstanceOf(SyntaxError);
      expect(classifyFailure(error)).toBe('transient');
    }
    // JSON.parse of a payload is still the message's fault.
    expect(classifyFailure(syntaxError)).toBe('permanent');
  });

  it('calls a service or network failure anywhere in the cause chain transient, even under a permanent class', () => {
    const failure = (name: string, message: string, marks: object) =>
      Object.assign(new Error(message), marks, { name });
    const failures = [
      failure('SyntaxError', 'Unexpected token <', { $metadata: { httpStatusCode: 502 } }),
      failure('SyntaxError', 'Unexpected token <', { $response: { statusCode: 504 } }),
      failure('InternalServerError', 'internal error', { $fault: 'server' }),
      failure('InternalFailure', 'internal error', { $metadata: { httpStatusCode: 500 } }),
      failure('TooManyRequestsException', 'slow down', { $metadata: { httpStatusCode: 429 } }),
      failure('ProvisionedThroughputExceededException', 'over capacity', {}),
      failure('Mystery', 'throttled by trait', { $retryable: { throttling: true } }),
      failure('Error', 'socket hang up', { code: 'ECONNRESET' }),
      failure('Error', 'connect ETIMEDOUT', { code: 'ETIMEDOUT' }),
      failure('Error', 'write EPIPE', { code: 'EPIPE' }),
      failure('TimeoutError', 'Connection timed out after 1000 ms', {}),
      failure('AbortError', 'Request aborted', {}),
      new ThrottledError('throttled', { resource: 't' }),
    ];
    for (const cause of failures) {
      const wrapped = new DecodeError('could not read the writer schema', { schemaId: 3, cause });
      expect(classifyFailure(wrapped), `${cause.name}: ${cause.message}`).toBe('transient');
    }
  });
});

describe('classifyBatchEntry', () => {
  it('calls a SendMessageBatch entry refused with SenderFault permanent, any other failed entry transient', () => {
    expect(classifyBatchEntry({ SenderFault: true })).toBe('permanent');
    expect(classifyBatchEntry({ SenderFault: false })).toBe('transient');
    expect(classifyBatchEntry({})).toBe('transient');
  });
});

describe('the transient retry schedule', () => {
  it('doubles from 2 s up to 120 s between deliveries', () => {
    expect(Array.from({ length: 10 }, (_, i) => backoffSeconds(i + 1))).toEqual([
      2, 4, 8, 16, 32, 64, 120, 120, 120, 120,
    ]);
    expect(backoffSeconds(0)).toBe(2);
    expect(backoffSeconds(10_000)).toBe(120);
    expect(backoffSeconds(3, { baseSeconds: 1, capSeconds: 3 })).toBe(3);
  });

  it('keeps a consumer retrying for at least 5 minutes before the DLQ (10 deliveries: 486 s)', () => {
    expect(DEFAULT_RETRY_SCHEDULE.maxReceiveCount).toBe(10);
    expect(retryWindowSeconds()).toBe(486);
    expect(retryWindowSeconds()).toBeGreaterThanOrEqual(MIN_RETRY_WINDOW_SECONDS);
    // What it replaces: 5 deliveries, 2^n s, gave up after 30 s.
    expect(retryWindowSeconds({ ...DEFAULT_RETRY_SCHEDULE, maxReceiveCount: 5 })).toBe(30);
  });

  it('keeps the relay retrying a transient failure for at least 5 minutes before Lambda gives up', () => {
    expect(RELAY_RETRY_DELAYS_MS.reduce((a, b) => a + b, 0)).toBe(7_750);
    expect(relayRetryWindowSeconds()).toBe(101 * 7.75);
    expect(relayRetryWindowSeconds()).toBeGreaterThanOrEqual(MIN_RETRY_WINDOW_SECONDS);
    expect(RELAY_MAX_RETRY_ATTEMPTS).toBe(100);
  });

  it('gives every deployed consumer queue a maxReceiveCount whose back-off lasts 5 minutes or more', () => {
    const groups = consumerGroupsFor({ LAMBDACABLE_EXAMPLE_CONSUMER: 'true' });
    const template = cloudFormation({
      prefix: 'p',
      functionName: (k) => `p-${k}`,
      consumerGroups: groups,
    });
    expect(groups.map((g) => g.name)).toEqual(['broadcast', 'audit']);
    for (const group of groups) {
      const queue = template.Resources[queueLogicalIds(group.name).queue] as unknown as {
        Properties: { RedrivePolicy: { maxReceiveCount: number } };
      };
      const maxReceiveCount = queue.Properties.RedrivePolicy.maxReceiveCount;
      expect(
        retryWindowSeconds({ ...DEFAULT_RETRY_SCHEDULE, maxReceiveCount }),
        group.name,
      ).toBeGreaterThanOrEqual(MIN_RETRY_WINDOW_SECONDS);
    }
  });
});
