import { describe, expect, it } from 'vitest';
import { type QueuedFrame, receiveInOrder } from '../../../../lib/realtime/gateway/frames';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('receiveInOrder: a batch of the frames queue', () => {
  it("hands one connection's frames over one after another, in order, whatever each takes", async () => {
    const frames: QueuedFrame[] = [];
    for (let i = 0; i < 30; i++) {
      for (const c of ['a', 'b', 'c']) frames.push({ connectionId: c, body: String(i) });
    }
    const running = new Map<string, number>();
    const seen = new Map<string, number[]>();
    let overlapWithin = 0;
    await receiveInOrder(frames, async (connectionId, body) => {
      running.set(connectionId, (running.get(connectionId) ?? 0) + 1);
      if (running.get(connectionId)! > 1) overlapWithin++;
      // Later frames are the quicker ones: a runner that started them at once would reorder.
      await sleep(30 - Number(body));
      seen.set(connectionId, [...(seen.get(connectionId) ?? []), Number(body)]);
      running.set(connectionId, running.get(connectionId)! - 1);
    });
    const inOrder = Array.from({ length: 30 }, (_, i) => i);
    expect(Object.fromEntries(seen)).toEqual({ a: inOrder, b: inOrder, c: inOrder });
    expect(overlapWithin).toBe(0);
  });

  it("runs different connections' frames at the same time", async () => {
    let running = 0;
    let most = 0;
    const frames = ['a', 'b', 'c', 'd'].map((connectionId) => ({ connectionId, body: '{}' }));
    await receiveInOrder(frames, async () => {
      most = Math.max(most, ++running);
      await sleep(20);
      running--;
    });
    expect(most).toBe(4);
  });

  it('hands nothing over for an empty batch', async () => {
    const got: string[] = [];
    await receiveInOrder([], async (c) => {
      got.push(c);
    });
    expect(got).toEqual([]);
  });
});
