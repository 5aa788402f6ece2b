import { threadId } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { type WorkerPool, workerPool } from '../../../infra/local/offline/workers.mjs';

const FIXTURE = new URL('../../helpers/fixtures/worker-handler.mjs', import.meta.url).href;

interface Ran {
  threadId: number;
  calls: number;
  secret: string | null;
  outside: string | null;
  requestId: string | null;
  remaining: number;
}

const pools: WorkerPool[] = [];
function pool(
  name = 'handler',
  env: Record<string, string> = { FIXTURE_SECRET: 's3cret' },
  onStart?: (instance: number) => void,
) {
  const p = workerPool(FIXTURE, name, env, onStart);
  pools.push(p);
  return p;
}
const run = (p: WorkerPool, event: object = {}, context = {}) =>
  p.handler(event, { getRemainingTimeInMillis: () => 30_000, ...context }) as Promise<Ran>;

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
  delete process.env.FIXTURE_OUTSIDE;
});

describe('npm start: functions in worker threads (infra/local/offline/workers.mjs)', () => {
  it('runs the handler in a thread of its own, with its environment and no other', async () => {
    process.env.FIXTURE_OUTSIDE = 'the test process';
    const ran = await run(pool());
    expect(ran.threadId).not.toBe(threadId);
    expect(ran.secret).toBe('s3cret');
    expect(ran.outside).toBeNull();
  });

  it('passes the context fields and the time left', async () => {
    const ran = await run(
      pool(),
      {},
      { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 20_000 },
    );
    expect(ran.requestId).toBe('req-1');
    expect(ran.remaining).toBeGreaterThan(15_000);
    expect(ran.remaining).toBeLessThanOrEqual(20_000);
  });

  it('keeps an idle worker for the next invocation, as a warm Lambda instance', async () => {
    const p = pool();
    const first = await run(p);
    const second = await run(p);
    expect(second.threadId).toBe(first.threadId);
    expect([first.calls, second.calls]).toEqual([1, 2]);
    expect(p.size).toBe(1);
  });

  it('starts another worker for an invocation that finds none idle, and says so each time', async () => {
    const started: number[] = [];
    const p = pool('handler', undefined, (n) => started.push(n));
    const [a, b] = await Promise.all([run(p, { waitMs: 200 }), run(p, { waitMs: 200 })]);
    expect(a.threadId).not.toBe(b.threadId);
    expect(p.size).toBe(2);
    await run(p);
    expect(started).toEqual([1, 2]);
  });

  it("rejects with the handler's error and keeps the worker", async () => {
    const p = pool();
    const first = await run(p);
    await expect(run(p, { fail: 'bad record' })).rejects.toMatchObject({
      name: 'TypeError',
      message: 'bad record',
    });
    const after = await run(p);
    expect(after.threadId).toBe(first.threadId);
    expect(after.calls).toBe(3);
  });

  it('fails the invocation of a worker that dies, and the next one gets a new worker', async () => {
    const p = pool();
    const first = await run(p);
    await expect(run(p, { crash: true })).rejects.toThrow('uncaught in a timer');
    const next = await run(p);
    expect(next.threadId).not.toBe(first.threadId);
    expect(next.calls).toBe(1);
  });

  it('stops a worker at the deadline, as Lambda stops a timed-out instance', async () => {
    const p = pool();
    const first = await run(p);
    await expect(
      run(p, { waitMs: 5_000 }, { getRemainingTimeInMillis: () => 300 }),
    ).rejects.toThrow('Task timed out after 0.30 seconds');
    expect(p.size).toBe(0);
    const next = await run(p);
    expect(next.threadId).not.toBe(first.threadId);
    expect(next.calls).toBe(1);
  });

  it('fails every invocation of a module without that handler, with its name', async () => {
    await expect(run(pool('notAFunction'))).rejects.toThrow(/exports no function notAFunction/);
  });

  it('refuses invocations once closed', async () => {
    const p = pool();
    await run(p);
    await p.close();
    expect(p.size).toBe(0);
    await expect(run(p)).rejects.toThrow(/stopped/);
  });
});
