import { CreateQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LOCAL_CREDENTIALS,
  LOCAL_REGION,
  type LocalService,
  startSqsLocal,
} from '../../infra/local/services';

// The local SQS takes the message bodies SQS takes, and refuses the ones it refuses: a chat
// frame or a broadcast with an emoji goes through on AWS, so it must on the local stack too.

let sqs: LocalService;
let client: SQSClient;
let queueUrl: string;

beforeAll(async () => {
  sqs = await startSqsLocal();
  client = new SQSClient({
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
    endpoint: sqs.endpoint,
  });
  const out = await client.send(
    new CreateQueueCommand({ QueueName: 'bodies.fifo', Attributes: { FifoQueue: 'true' } }),
  );
  queueUrl = out.QueueUrl!;
});

afterAll(async () => {
  client?.destroy();
  await sqs?.stop();
});

const send = (body: string, id: string) =>
  client.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: body,
      MessageGroupId: 'g',
      MessageDeduplicationId: id,
    }),
  );

describe('the local SQS (fauxqs) and message bodies', () => {
  it('accepts characters past U+FFFF (an emoji), as SQS does', async () => {
    const out = await send(
      JSON.stringify({ command: 'whisper', data: { text: 'hi 😀 𝄞' } }),
      'astral',
    );
    expect(out.MessageId).toBeTruthy();
  });

  it('refuses the characters SQS refuses: a control character, a lone surrogate', async () => {
    await expect(send('a\u0001b', 'control')).rejects.toThrow(/invalid/i);
    await expect(send('a\uD800b', 'surrogate')).rejects.toThrow(/invalid/i);
  });
});
