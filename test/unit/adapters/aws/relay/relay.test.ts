import { createHash } from 'node:crypto';
import type { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import {
  deduplicationId,
  HASHED_ID_PREFIX,
  messageGroupId,
  OutboxRelay,
} from '../../../../../lib/adapters/aws/relay/relay';

// What SQS accepts for MessageGroupId and MessageDeduplicationId.
const VALID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

function sha(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

describe('messageGroupId', () => {
  it.each([
    ['chat/42'],
    ['a'],
    ['x'.repeat(128)],
    ['!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'],
    ['$commands'],
  ])('keeps a key SQS accepts as it is: %s', (key) => {
    expect(messageGroupId(key)).toBe(key);
  });

  it.each([
    ['with a space', 'chat 42'],
    ['non-ASCII', 'café/ü'],
    ['emoji', 'room/🎉'],
    ['over 128 characters', 'x'.repeat(129)],
    ['empty', ''],
    ['a tab', 'a\tb'],
    ['DEL', 'a\x7fb'],
  ])('maps a key %s to a valid, stable group id', (_, key) => {
    const id = messageGroupId(key);
    expect(id).toMatch(VALID);
    expect(id).toBe(`${HASHED_ID_PREFIX}${sha(key)}`);
    expect(messageGroupId(key)).toBe(id);
  });

  it('hashes a valid key that starts with the prefix, so it never equals a hashed key', () => {
    const other = 'chat 42';
    const forged = messageGroupId(other); // a raw key spelled like another's hash
    expect(forged.startsWith(HASHED_ID_PREFIX)).toBe(true);
    expect(messageGroupId(forged)).not.toBe(forged);
    expect(messageGroupId(forged)).toBe(`${HASHED_ID_PREFIX}${sha(forged)}`);
    expect(messageGroupId(forged)).toMatch(VALID);
  });

  it('gives different keys different ids', () => {
    const keys = ['a b', 'a  b', 'x'.repeat(129), 'x'.repeat(130), 'é', 'e'];
    expect(new Set(keys.map(messageGroupId)).size).toBe(keys.length);
  });
});

describe('deduplicationId', () => {
  it('keeps event ids of newEventId and hashes what SQS would refuse', () => {
    expect(deduplicationId('019000c79c00c4e2a91f7d3b5e6a')).toBe('019000c79c00c4e2a91f7d3b5e6a');
    expect(deduplicationId('id with spaces')).toMatch(VALID);
    expect(deduplicationId('i'.repeat(200))).toMatch(VALID);
  });
});

function insert(key: string, id: string, seq: string): DynamoDBRecord {
  return {
    eventName: 'INSERT',
    dynamodb: {
      SequenceNumber: seq,
      NewImage: marshall({
        pk: `t#${key}`,
        sk: id,
        topic: 't',
        key,
        type: 'x',
        payload: new Uint8Array([0, 0, 0, 0, 1]),
      }) as NonNullable<DynamoDBRecord['dynamodb']>['NewImage'],
    },
  };
}

/** An SQS client that records each batch and accepts it, for what the relay sends. */
function recordingSqs(): { sqs: SQSClient; sent: SendMessageBatchCommand['input'][] } {
  const sent: SendMessageBatchCommand['input'][] = [];
  const sqs = {
    send: async (command: SendMessageBatchCommand) => {
      sent.push(command.input);
      return { Successful: [], Failed: [] };
    },
  } as unknown as SQSClient;
  return { sqs, sent };
}

describe('OutboxRelay', () => {
  it('sends bodies in ASCII: the same JSON, with no character SQS (or fauxqs) refuses', async () => {
    const { sqs, sent } = recordingSqs();
    const relay = new OutboxRelay({ sqs, routes: { t: ['q'] }, onRefused: () => {} });
    const key = 'café/🎉/\uffff';
    await relay.relay([insert(key, 'id1', '1')]);
    const body = sent[0]?.Entries?.[0]?.MessageBody ?? '';
    expect(body).toMatch(/^[\x20-\x7e]*$/);
    expect(JSON.parse(body).key).toBe(key);
  });

  it('sends only group and deduplication ids SQS accepts, one id per key', async () => {
    const { sqs, sent } = recordingSqs();
    const relay = new OutboxRelay({ sqs, routes: { t: ['q'] }, onRefused: () => {} });
    const keys = ['chat 42', 'café', 'x'.repeat(300), 'chat/42', 'chat 42'];
    const result = await relay.relay(
      keys.map((k, i) => insert(k, i === 1 ? 'id with space' : `id${i}`, String(100 + i))),
    );
    expect(result.batchItemFailures).toEqual([]);
    const entries = sent.flatMap((s) => s.Entries ?? []);
    expect(entries).toHaveLength(keys.length);
    for (const e of entries) {
      expect(e.MessageGroupId).toMatch(VALID);
      expect(e.MessageDeduplicationId).toMatch(VALID);
    }
    expect(entries.map((e) => e.MessageGroupId)).toEqual(keys.map(messageGroupId));
    // The two events of one key never share a request (a retry could reorder them).
    for (const s of sent) {
      const groups = (s.Entries ?? []).map((e) => e.MessageGroupId);
      expect(new Set(groups).size).toBe(groups.length);
    }
  });
});
