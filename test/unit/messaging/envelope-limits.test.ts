import { describe, expect, it } from 'vitest';
import {
  BroadcastEvent,
  checkOutboxRecord,
  checkSqsBody,
  decodeEnvelope,
  envelopeBody,
  eventTypeLookup,
  LimitExceededError,
  MAX_BROADCAST_DATA_BYTES,
  MAX_ENVELOPE_OFFSET,
  MAX_SQS_BODY_BYTES,
  MessageFormatError,
  type OutboxRecord,
  RemoteCommandEvent,
  sqsBodyBytes,
} from '../../../lib/core';

function record(payloadBytes: number, key = 'k', extra: Partial<OutboxRecord> = {}): OutboxRecord {
  return {
    id: '0190f3a4b5c6d7e8f9a0b1c2d3e4',
    topic: 'orders',
    key,
    type: 'shop.OrderPlaced',
    headers: { trace: 'é🎉' },
    payload: new Uint8Array(payloadBytes).fill(7),
    timestamp: 1_700_000_000_000,
    ...extra,
  };
}

/** A record whose body at the largest offset is exactly `bytes`: payload, then key padding. */
function recordOfBody(bytes: number): OutboxRecord {
  const frame = sqsBodyBytes(record(0));
  // Base64 grows in steps of 4: the payload gets within 4 bytes, the key does the rest.
  const payload = Math.floor((bytes - frame) / 4) * 3;
  const short = sqsBodyBytes(record(payload));
  return record(payload, `k${'x'.repeat(bytes - short)}`);
}

describe('sqsBodyBytes', () => {
  it.each([0, 1, 2, 3, 4, 5, 1000, 190_000])(
    'is the exact length of the longest body the relay sends (a replay), for a %i-byte payload',
    (n) => {
      const r = record(n, 'café/🎉');
      const replayed = { replayed: true };
      expect(sqsBodyBytes(r, 123n)).toBe(Buffer.byteLength(envelopeBody(r, 123n, replayed)));
      expect(sqsBodyBytes(r)).toBe(
        Buffer.byteLength(envelopeBody(r, MAX_ENVELOPE_OFFSET, replayed)),
      );
      // The first relay's body is shorter by `,"replayed":true`.
      expect(sqsBodyBytes(r, 123n) - Buffer.byteLength(envelopeBody(r, 123n))).toBe(
        ',"replayed":true'.length,
      );
    },
  );

  it('sizes at the largest offset a stream sequence number can give (40 digits)', () => {
    expect(MAX_ENVELOPE_OFFSET.toString()).toHaveLength(40);
    const r = record(10);
    expect(sqsBodyBytes(r)).toBeGreaterThanOrEqual(sqsBodyBytes(r, 10n ** 39n));
    expect(sqsBodyBytes(r) - sqsBodyBytes(r, 1n)).toBe(39);
  });
});

describe('decodeEnvelope', () => {
  it('carries offsets of up to 40 digits exactly and refuses longer ones', () => {
    const decoded = decodeEnvelope(envelopeBody(record(3), MAX_ENVELOPE_OFFSET));
    expect(decoded.offset).toBe(MAX_ENVELOPE_OFFSET);
    expect(() => decodeEnvelope(envelopeBody(record(3), MAX_ENVELOPE_OFFSET + 1n), 'm1')).toThrow(
      MessageFormatError,
    );
  });
});

describe('checkSqsBody', () => {
  it(`accepts a body of exactly MAX_SQS_BODY_BYTES (${MAX_SQS_BODY_BYTES})`, () => {
    const r = recordOfBody(MAX_SQS_BODY_BYTES);
    expect(sqsBodyBytes(r)).toBe(MAX_SQS_BODY_BYTES);
    expect(() => checkSqsBody(r)).not.toThrow();
  });

  it('refuses one byte more, naming the limit and the size', () => {
    const r = recordOfBody(MAX_SQS_BODY_BYTES + 1);
    expect(sqsBodyBytes(r)).toBe(MAX_SQS_BODY_BYTES + 1);
    const error = (() => {
      try {
        checkSqsBody(r);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(LimitExceededError);
    expect(error).toMatchObject({
      bytes: MAX_SQS_BODY_BYTES + 1,
      limit: MAX_SQS_BODY_BYTES,
      kind: 'payload',
      message: `SQS body of shop.OrderPlaced ${r.id} is ${MAX_SQS_BODY_BYTES + 1} bytes, the limit is ${MAX_SQS_BODY_BYTES} (MAX_SQS_BODY_BYTES: the envelope carries the payload in base64)`,
    });
  });

  it('counts a non-ASCII key as its escapes: 6 bytes a UTF-16 unit', () => {
    expect(sqsBodyBytes(record(0, 'é')) - sqsBodyBytes(record(0, 'e'))).toBe(5);
  });
});

describe('BroadcastEvent.check (the frame limit)', () => {
  it(`accepts data of exactly MAX_BROADCAST_DATA_BYTES (${MAX_BROADCAST_DATA_BYTES}) and refuses one byte more`, () => {
    const data = (n: number) => JSON.stringify('x'.repeat(n - 2));
    expect(() =>
      BroadcastEvent.check({ stream: 's', data: data(MAX_BROADCAST_DATA_BYTES) }),
    ).not.toThrow();
    expect(() =>
      BroadcastEvent.check({ stream: 's', data: data(MAX_BROADCAST_DATA_BYTES + 1) }),
    ).toThrow(
      `broadcast: "data" is ${MAX_BROADCAST_DATA_BYTES + 1} bytes, the limit is ${MAX_BROADCAST_DATA_BYTES}`,
    );
  });

  it('counts data as re-encoded in the frame: escapes JSON adds count', () => {
    // "\u00e9" decodes to é and is framed as é: 2 bytes; a control character grows instead.
    const grows = JSON.stringify('\u0001'.repeat(MAX_BROADCAST_DATA_BYTES / 6 + 1));
    expect(() => BroadcastEvent.check({ stream: 's', data: grows })).toThrow(LimitExceededError);
  });

  it('refuses a remote command over the limit', () => {
    expect(() =>
      RemoteCommandEvent.check({
        command: 'disconnect',
        payload: 'x'.repeat(MAX_BROADCAST_DATA_BYTES),
      }),
    ).toThrow(/the command is \d+ bytes, the limit is 98304/);
  });
});

describe('checkOutboxRecord', () => {
  it("applies a known type's check to a raw record's decoded payload", () => {
    const framed = (data: string) =>
      new Uint8Array([0, 0, 0, 0, 1, ...BroadcastEvent.avroType.toBuffer({ stream: 's', data })]);
    const types = eventTypeLookup([BroadcastEvent]);
    const ok = record(0, 's', { type: BroadcastEvent.name, payload: framed('"hi"') });
    const big = record(0, 's', {
      type: BroadcastEvent.name,
      payload: framed('x'.repeat(MAX_BROADCAST_DATA_BYTES + 1)),
    });
    expect(() => checkOutboxRecord(ok, types)).not.toThrow();
    // Not JSON: framed as a JSON string, quotes included.
    expect(() => checkOutboxRecord(big, types)).toThrow(/"data" is 98307 bytes/);
    // Without the type, only the SQS body is checked: it fits.
    expect(() => checkOutboxRecord(big)).not.toThrow();
  });
});
