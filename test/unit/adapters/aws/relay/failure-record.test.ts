import { describe, expect, it } from 'vitest';
import { outboxItem } from '../../../../../lib/adapters/aws/dynamodb/outbox';
import { parseRelayFailure, streamFailureRecord } from '../../../../../lib/aws';
import { MessageFormatError } from '../../../../../lib/core';

/** The on-failure record of a DynamoDB stream event source, as the Lambda guide shows it. */
const AWS_EXAMPLE = {
  requestContext: {
    requestId: '316aa6d0-8154-xmpl-9af7-85d5f4a6bc81',
    functionArn: 'arn:aws:lambda:us-east-2:123456789012:function:myfunction',
    condition: 'RetryAttemptsExhausted',
    approximateInvokeCount: 1,
  },
  responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
  version: '1.0',
  timestamp: '2019-11-14T00:13:49.717Z',
  DDBStreamBatchInfo: {
    shardId: 'shardId-00000001573689847184-864758bb',
    startSequenceNumber: '800000000003126276362',
    endSequenceNumber: '800000000003126276362',
    approximateArrivalOfFirstRecord: '2019-11-14T00:13:19Z',
    approximateArrivalOfLastRecord: '2019-11-14T00:13:19Z',
    batchSize: 1,
    streamArn:
      'arn:aws:dynamodb:us-east-2:123456789012:table/mytable/stream/2019-11-14T00:04:06.388',
  },
};

describe('relay failure records', () => {
  it('reads the shard and sequence range of the record Lambda sends', () => {
    expect(parseRelayFailure(JSON.stringify(AWS_EXAMPLE))).toEqual({
      condition: 'RetryAttemptsExhausted',
      timestamp: '2019-11-14T00:13:49.717Z',
      ...AWS_EXAMPLE.DDBStreamBatchInfo,
    });
  });

  it('refuses a body that names no range, with a MessageFormatError', () => {
    const info = AWS_EXAMPLE.DDBStreamBatchInfo;
    for (const body of [
      'not json',
      'null',
      JSON.stringify({ requestContext: {} }),
      JSON.stringify({ DDBStreamBatchInfo: { ...info, shardId: undefined } }),
      JSON.stringify({ DDBStreamBatchInfo: { ...info, startSequenceNumber: '1e5' } }),
      JSON.stringify({
        DDBStreamBatchInfo: { ...info, startSequenceNumber: '9', endSequenceNumber: '8' },
      }),
    ]) {
      expect(() => parseRelayFailure(body), body).toThrow(MessageFormatError);
    }
  });

  it('builds, for the local stack, the record Lambda would send for given-up records', () => {
    const record = streamFailureRecord({
      records: [
        { dynamodb: { SequenceNumber: '100', ApproximateCreationDateTime: 1_700_000_000 } },
        {
          dynamodb: {
            SequenceNumber: '200',
            ApproximateCreationDateTime: new Date(1_700_000_002_500),
          },
        },
      ],
      shardId: 'shardId-1',
      streamArn: 'arn:stream',
      functionArn: 'arn:fn',
      invokeCount: 101,
      requestId: 'r-1',
      now: new Date('2024-01-01T00:00:00.000Z'),
    });
    expect(Object.keys(record).sort()).toEqual(Object.keys(AWS_EXAMPLE).sort());
    expect(Object.keys(record.DDBStreamBatchInfo).sort()).toEqual(
      Object.keys(AWS_EXAMPLE.DDBStreamBatchInfo).sort(),
    );
    expect(record.DDBStreamBatchInfo).toEqual({
      shardId: 'shardId-1',
      startSequenceNumber: '100',
      endSequenceNumber: '200',
      approximateArrivalOfFirstRecord: '2023-11-14T22:13:20Z',
      approximateArrivalOfLastRecord: '2023-11-14T22:13:22Z',
      batchSize: 2,
      streamArn: 'arn:stream',
    });
    expect(record.requestContext).toMatchObject({
      condition: 'RetryAttemptsExhausted',
      approximateInvokeCount: 101,
    });
    expect(parseRelayFailure(JSON.stringify(record))).toMatchObject({
      shardId: 'shardId-1',
      startSequenceNumber: '100',
      endSequenceNumber: '200',
      batchSize: 2,
    });
  });

  it('keeps outbox rows 2 days: past the stream 24 h, so a failure record can be replayed from them', () => {
    const createdAt = 1_700_000_000_123;
    const item = outboxItem({
      id: 'e-1',
      topic: 't',
      key: 'k',
      type: '',
      headers: {},
      payload: new Uint8Array([1]),
      timestamp: createdAt,
    });
    expect(Number(item.expiresAt?.N)).toBe(Math.floor(createdAt / 1000) + 172_800);
  });
});
