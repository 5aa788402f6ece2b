import { describe, expect, it } from 'vitest';
import { type ConsumedMessage, consumeSqsBatch } from '../../../../../lib/aws';
import type { QueuedMessage } from '../../../../../lib/testing';
import { memorySqsEvent } from '../../../../helpers/memory-lambda';

const quiet = { error: () => {}, warn: () => {} };
const text = (m: ConsumedMessage) => new TextDecoder().decode(m.value);

/** One record per `key:value`, offsets rising in the given order. */
function batch(...items: string[]) {
  return memorySqsEvent(
    items.map((item, i): QueuedMessage => {
      const [key, value] = item.split(':') as [string, string];
      return {
        id: `${key}-${value}`,
        key,
        value: new TextEncoder().encode(value),
        headers: {},
        type: 'T',
        offset: BigInt(i + 1),
        receiveCount: 1,
        visibleAt: 0,
        inFlight: true,
      };
    }),
  );
}

/**
 * A handler for which `slow` (a message value) waits until every other message of the batch
 * has started, or until `patienceMs` passed; it records the order things happen in.
 */
function waitingHandler(slow: string, others: number, patienceMs = 2_000) {
  const events: string[] = [];
  let started = 0;
  let release: () => void = () => {};
  const othersStarted = new Promise<void>((r) => {
    release = r;
  });
  const handler = async (m: ConsumedMessage) => {
    const value = text(m);
    events.push(`start ${value}`);
    if (value === slow) {
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<void>((r) => {
        timer = setTimeout(r, patienceMs);
      });
      await Promise.race([othersStarted, gaveUp]);
      clearTimeout(timer);
    } else if (++started === others) {
      release();
    }
    events.push(`end ${value}`);
  };
  return { events, handler };
}

describe('consumeSqsBatch: no head-of-line blocking across message groups', () => {
  it("starts another group's message while one group's message is still running", async () => {
    // The broadcast consumer's case: a 100k fan-out on `big` in the batch with a small
    // stream's frame. The small one must not wait for the big one.
    const { events, handler } = waitingHandler('fanout', 2);
    const response = await consumeSqsBatch(batch('big:fanout', 'small:1', 'other:1'), handler, {
      group: 'g',
      logger: quiet,
    });
    expect(response.batchItemFailures).toEqual([]);
    expect(events.indexOf('start 1')).toBeLessThan(events.indexOf('end fanout'));
    expect(events.indexOf('end 1')).toBeLessThan(events.indexOf('end fanout'));
  });

  it("keeps one group's messages one after another, in order", async () => {
    const events: string[] = [];
    await consumeSqsBatch(
      batch('a:1', 'b:1', 'a:2', 'b:2', 'a:3'),
      async (m) => {
        events.push(`start ${m.partition}${text(m)}`);
        await new Promise((r) => setTimeout(r, 5));
        events.push(`end ${m.partition}${text(m)}`);
      },
      { group: 'g', logger: quiet },
    );
    expect(events.filter((e) => e.includes(' a'))).toEqual([
      'start a1',
      'end a1',
      'start a2',
      'end a2',
      'start a3',
      'end a3',
    ]);
    expect(events.filter((e) => e.includes(' b'))).toEqual([
      'start b1',
      'end b1',
      'start b2',
      'end b2',
    ]);
  });

  it("fails a failed message's later group mates only, reported in the batch's order", async () => {
    const handled: string[] = [];
    const event = batch('a:1', 'b:1', 'a:2', 'b:2', 'c:1');
    const response = await consumeSqsBatch(
      event,
      async (m) => {
        handled.push(`${m.partition}${text(m)}`);
        if (m.partition === 'a' && text(m) === '1') throw new Error('a1 fails');
        if (m.partition === 'b' && text(m) === '2') throw new Error('b2 fails');
      },
      { group: 'g', logger: quiet },
    );
    expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(
      [0, 2, 3].map((i) => event.Records[i]!.messageId),
    );
    expect(handled.sort()).toEqual(['a1', 'b1', 'b2', 'c1']);
  });

  it('with groupConcurrency 1, handles the records one after another, as they came', async () => {
    const { events, handler } = waitingHandler('fanout', 1, 50);
    await consumeSqsBatch(batch('big:fanout', 'small:1'), handler, {
      group: 'g',
      logger: quiet,
      groupConcurrency: 1,
    });
    expect(events).toEqual(['start fanout', 'end fanout', 'start 1', 'end 1']);
  });
});
