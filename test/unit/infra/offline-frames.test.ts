import type { SendMessageCommandInput } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { FRAMES_REQUEST_TEMPLATE } from '../../../infra/deploy/websocket/frames-template';
import {
  checkRequestTemplate,
  FramesIntegrationError,
  framesIntegration,
  internalServerErrorFrame,
  messageContext,
  renderRequestTemplate,
  sendMessageInput,
  urlEncode,
} from '../../../infra/local/offline/frames-integration.mjs';

const QUEUE = 'http://127.0.0.1:4566/000000000000/lambdacable-local-frames.fifo';

/** Renders the real template for a frame and parses it as the SQS Query protocol reads it. */
function roundTrip(connectionId: string, body: string) {
  const context = messageContext({ connectionId });
  const form = renderRequestTemplate(FRAMES_REQUEST_TEMPLATE, { context, body });
  return { context, form, input: sendMessageInput(form, QUEUE) };
}

/** A deterministic source of small delays (mulberry32). */
function delays(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * 4);
  };
}

/** `${input.body}`, Velocity's formal reference (spelt so, not to look like a placeholder). */
const FORMAL_REFERENCE = ['$', '{input.body}'].join('');

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("npm start: the $default route's request template (frames-integration.mjs)", () => {
  it('renders the deploy template into a SendMessage of the frame, grouped by connection', () => {
    const { context, form, input } = roundTrip('Zm9vYmFy=', '{"command":"subscribe"}');
    expect(form).toBe(
      'Action=SendMessage&MessageGroupId=Zm9vYmFy%3D' +
        `&MessageDeduplicationId=${context.requestId}` +
        '&MessageBody=%7B%22command%22%3A%22subscribe%22%7D',
    );
    expect(input).toEqual({
      QueueUrl: QUEUE,
      MessageGroupId: 'Zm9vYmFy=',
      MessageDeduplicationId: context.requestId,
      MessageBody: '{"command":"subscribe"}',
    });
  });

  it.each([
    ['a+b/c=', '{"command":"message","data":"{\\"text\\":\\"a & b = c + d\\"}"}'],
    ['==/++', 'spaces  and\nnewlines\r\n\tand tabs '],
    ['x', "unicode: ü 漢字 😀, percent %20 %, plus +, star *, tilde ~, quote ' ( ) !"],
    ['y', '&=&&==+'],
    ['z', ''],
  ])('carries connection %j and its frame through render and parse exactly', (id, body) => {
    const { input } = roundTrip(id, body);
    expect(input.MessageGroupId).toBe(id);
    expect(input.MessageBody).toBe(body);
  });

  it("encodes as Java's URLEncoder: a space as +, and !'()~ escaped where encodeURIComponent does not", () => {
    expect(urlEncode("a b!'()~*-._&=+/ü😀\n")).toBe(
      'a+b%21%27%28%29%7E*-._%26%3D%2B%2F%C3%BC%F0%9F%98%80%0A',
    );
    expect(urlEncode('lone \ud800 surrogate')).toBe('lone+%3F+surrogate');
  });

  it('renders $context names, dotted ones too, and $input.body outside urlEncode', () => {
    const context = messageContext({
      connectionId: 'c1',
      connectedAt: 1_000,
      requestTimeEpoch: Date.UTC(2024, 1, 9, 8, 7, 6),
      newId: (() => {
        let n = 0;
        return () => `id-${++n}`;
      })(),
    });
    expect(
      renderRequestTemplate(
        '$context.routeKey $context.eventType $context.requestId=$context.extendedRequestId ' +
          '$context.messageId $context.identity.sourceIp $context.requestTime ' +
          '$context.connectedAt $input.body',
        { context, body: 'raw & body' },
      ),
    ).toBe('$default MESSAGE id-1=id-1 id-2 127.0.0.1 09/Feb/2024:08:07:06 +0000 1000 raw & body');
  });

  it.each([
    ["$input.json('$')", "$input.json('$')"],
    ['$input.path("$.command")', '$input.path("$.command")'],
    ['#set($x = 1)$x', '#set($x = 1)$x'],
    ['## a comment', '## a comment'],
    ['$!input.body', '$!input.body'],
    [FORMAL_REFERENCE, FORMAL_REFERENCE],
    ['\\$input.body', '\\$input.body'],
    ['$util.base64Encode($input.body)', '$util.base64Encode($input.body)'],
    ["$util.urlEncode('literal')", "$util.urlEncode('literal')"],
    ["a=$util.urlEncode($input.json('$'))", "$util.urlEncode($input.json('$'))"],
    ['$input.body.length()', '$input.body.length()'],
    ['$stageVariables.queue', '$stageVariables.queue'],
    ['price in $5', '$5'],
  ])('refuses VTL it cannot render: %s', (template, named) => {
    const context = messageContext({ connectionId: 'c' });
    expect(() => renderRequestTemplate(template, { context, body: '{}' })).toThrow(
      `unsupported VTL in the request template at ${template.indexOf(named)}: ${named}`,
    );
    expect(() => checkRequestTemplate(`Action=SendMessage&MessageBody=${template}`)).toThrow(
      'unsupported VTL',
    );
  });

  it('refuses a $context name it does not know, listing the ones it does', () => {
    expect(() => checkRequestTemplate('MessageBody=$context.authorizer.principalId')).toThrow(
      /unknown \$context variable in the request template at 12: \$context\.authorizer\.principalId \(the local stack knows \$context\.apiId, .*\$context\.connectionId/,
    );
  });

  it('checks the deploy template at startup without complaint', () => {
    expect(() => checkRequestTemplate(FRAMES_REQUEST_TEMPLATE)).not.toThrow();
  });
});

describe('npm start: the SendMessage form (frames-integration.mjs)', () => {
  it('reads DelaySeconds and numbered message attributes into the SDK input', () => {
    const form = [
      'Action=SendMessage',
      'Version=2012-11-05',
      'MessageBody=hi',
      'DelaySeconds=5',
      'MessageAttribute.2.Name=kind',
      'MessageAttribute.2.Value.DataType=String',
      'MessageAttribute.2.Value.StringValue=frame+of+a+client',
      'MessageAttribute.1.Name=blob',
      'MessageAttribute.1.Value.DataType=Binary',
      `MessageAttribute.1.Value.BinaryValue=${encodeURIComponent(Buffer.from([0, 255]).toString('base64'))}`,
    ].join('&');
    expect(sendMessageInput(form, QUEUE)).toEqual({
      QueueUrl: QUEUE,
      MessageBody: 'hi',
      DelaySeconds: 5,
      MessageAttributes: {
        blob: { DataType: 'Binary', BinaryValue: Uint8Array.from([0, 255]) },
        kind: { DataType: 'String', StringValue: 'frame of a client' },
      },
    });
  });

  it('refuses an action other than SendMessage, or none', () => {
    expect(() => sendMessageInput('Action=SendMessageBatch&MessageBody=x', QUEUE)).toThrow(
      'unsupported SQS action: SendMessageBatch (the local integration sends SendMessage only)',
    );
    expect(() => sendMessageInput('MessageBody=x', QUEUE)).toThrow('unsupported SQS action: none');
    expect(() => checkRequestTemplate('Action=DeleteQueue')).toThrow(
      'unsupported SQS action: DeleteQueue',
    );
  });

  it('refuses what it would not send: unknown or repeated parameters, no body, bad numbers', () => {
    const send = 'Action=SendMessage&MessageBody=x';
    expect(() => sendMessageInput(`${send}&QueueUrl=elsewhere`, QUEUE)).toThrow(
      'unsupported SendMessage parameter: QueueUrl',
    );
    expect(() => sendMessageInput(`${send}&MessageBody=y`, QUEUE)).toThrow(
      'SQS parameter MessageBody is given twice',
    );
    expect(() => sendMessageInput('Action=SendMessage', QUEUE)).toThrow('no MessageBody');
    expect(() => sendMessageInput(`${send}&DelaySeconds=1.5`, QUEUE)).toThrow(
      'DelaySeconds is not a whole number: 1.5',
    );
    expect(() => sendMessageInput(`${send}&MessageAttribute.1.Name=a`, QUEUE)).toThrow(
      'MessageAttribute.1 needs a Name, a Value.DataType and a value',
    );
  });
});

describe("npm start: the $default route's SQS integration (frames-integration.mjs)", () => {
  it("sends each connection's frames one after another in the order received", async () => {
    const next = delays(42);
    const sent: SendMessageCommandInput[] = [];
    const inFlight = new Map<string, number>();
    let most = 0;
    let mostOverall = 0;
    let overall = 0;
    const integration = framesIntegration({
      queueUrl: QUEUE,
      template: FRAMES_REQUEST_TEMPLATE,
      send: async (input) => {
        const group = input.MessageGroupId!;
        inFlight.set(group, (inFlight.get(group) ?? 0) + 1);
        overall++;
        most = Math.max(most, inFlight.get(group)!);
        mostOverall = Math.max(mostOverall, overall);
        await wait(next());
        sent.push(input);
        inFlight.set(group, inFlight.get(group)! - 1);
        overall--;
      },
    });
    const connections = ['conn=a+', 'conn/b', 'conn c'];
    const received: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) {
      for (const id of connections) received.push(integration.receive(id, `{"n":${i}}`));
    }
    await Promise.all(received);
    for (const id of connections) {
      const bodies = sent.filter((s) => s.MessageGroupId === id).map((s) => s.MessageBody);
      expect(bodies).toEqual(Array.from({ length: 50 }, (_, i) => `{"n":${i}}`));
    }
    expect(most).toBe(1);
    expect(mostOverall).toBeGreaterThan(1);
    expect(integration.pending).toBe(0);
  });

  it('gives every frame a request id of its own as its deduplication id', async () => {
    const ids: (string | undefined)[] = [];
    const integration = framesIntegration({
      queueUrl: QUEUE,
      template: FRAMES_REQUEST_TEMPLATE,
      send: async (input) => ids.push(input.MessageDeduplicationId),
    });
    await Promise.all([integration.receive('c', 'same'), integration.receive('c', 'same')]);
    expect(new Set(ids).size).toBe(2);
  });

  it('keeps sending the frames after a failed one, which rejects with the client error frame', async () => {
    const sent: string[] = [];
    const integration = framesIntegration({
      queueUrl: QUEUE,
      template: FRAMES_REQUEST_TEMPLATE,
      send: async (input) => {
        if (input.MessageBody === 'second') throw new Error('QueueDoesNotExist');
        sent.push(input.MessageBody!);
      },
      newId: (() => {
        let n = 0;
        return () => `req-${++n}`;
      })(),
    });
    const [first, second, third] = ['first', 'second', 'third'].map((b) =>
      integration.receive('c=1', b),
    );
    await expect(first).resolves.toBeUndefined();
    const error = await second!.catch((e: unknown) => e);
    await expect(third).resolves.toBeUndefined();
    expect(sent).toEqual(['first', 'third']);
    expect(error).toBeInstanceOf(FramesIntegrationError);
    expect(error).toMatchObject({
      name: 'FramesIntegrationError',
      connectionId: 'c=1',
      requestId: 'req-3',
      message: `frame req-3 of connection c=1 was not sent to ${QUEUE}: QueueDoesNotExist`,
    });
    expect((error as FramesIntegrationError).cause).toEqual(new Error('QueueDoesNotExist'));
    expect(JSON.parse((error as FramesIntegrationError).frame)).toEqual({
      message: 'Internal server error',
      connectionId: 'c=1',
      requestId: 'req-3',
    });
    expect(internalServerErrorFrame('c', 'r')).toBe(
      '{"message":"Internal server error","connectionId":"c","requestId":"r"}',
    );
  });

  it('does not hold one connection up behind another', async () => {
    let release = () => {};
    const sent: string[] = [];
    const integration = framesIntegration({
      queueUrl: QUEUE,
      template: FRAMES_REQUEST_TEMPLATE,
      send: async (input) => {
        if (input.MessageGroupId === 'slow') await new Promise<void>((r) => (release = r));
        sent.push(input.MessageGroupId!);
      },
    });
    const slow = integration.receive('slow', 'x');
    await integration.receive('fast', 'y');
    expect(sent).toEqual(['fast']);
    expect(integration.pending).toBe(1);
    release();
    await slow;
    expect(sent).toEqual(['fast', 'slow']);
  });

  it('refuses at once a template it cannot render', () => {
    expect(() =>
      framesIntegration({ queueUrl: QUEUE, template: '#set($a = 1)', send: async () => {} }),
    ).toThrow('unsupported VTL in the request template at 0: #set($a = 1)');
  });
});
