/**
 * AWS requests per connect on the local stack: `$connect` (wsConnect) and the pinger's
 * welcome, counted with the call log, over connections that connect one after another and
 * wait for their welcome. The pinger's tick Queries (`byBucket`) are its fixed cost, not a
 * connect's, and are reported apart.
 */
import { createConnectToken } from '../lib/core';
import type { BenchSecrets, BenchStack } from './stack';
import type { Figure } from './util';
import { BenchClient } from './ws-clients';

const CONNECTS = 50;

export async function benchConnectCost(
  bench: BenchStack,
  secrets: BenchSecrets,
): Promise<Figure[]> {
  const clients: BenchClient[] = [];
  const from = bench.callLog.mark();
  const started = Date.now();
  for (let i = 0; i < CONNECTS; i++) {
    const token = await createConnectToken(
      { sub: `connect-cost-${i}`, ttlSeconds: 600 },
      secrets.LAMBDACABLE_JWT_SECRET,
    );
    // pi=60: no ping falls into the counted window.
    clients.push(await BenchClient.connect(bench.stack.wsUrl, token, 30_000, { pi: '60' }));
  }
  const seconds = (Date.now() - started) / 1000;
  const calls = bench.callLog.between(from, bench.callLog.mark());
  for (const c of clients) c.close();

  const isTick = (c: (typeof calls)[number]) =>
    c.function.endsWith('-pinger') && c.operation === 'Query' && c.input.IndexName === 'byBucket';
  const perConnect = new Map<string, number>();
  for (const c of calls.filter((c) => !isTick(c))) {
    const key = `${c.function.replace(/^lambdacable-local-/, '')} ${c.operation}`;
    perConnect.set(key, (perConnect.get(key) ?? 0) + 1);
  }
  const invocations = 1; // wsConnect; the welcome rides on the pinger, already running
  const sdkCalls = [...perConnect.values()].reduce((a, b) => a + b, 0) / CONNECTS;
  const ticks = calls.filter(isTick).length;
  return [
    {
      name: 'AWS requests per connect (SDK calls + Lambda invocations)',
      value: (sdkCalls + invocations).toFixed(2),
      // The same calls plus an Invoke, the wsWelcome invocation and its read of the
      // connection, and one more post (and claim and release) per 410 while polling.
      reference: `${(sdkCalls + invocations + 3).toFixed(2)} at least (a wsWelcome per connect)`,
      ratio: `${((sdkCalls + invocations) / (sdkCalls + invocations + 3)).toFixed(2)}× or less`,
      extra: `SDK calls ${sdkCalls.toFixed(2)} + ${invocations} invocation (wsConnect)`,
    },
    ...[...perConnect.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, n]) => ({
        name: `  ${key}`,
        value: (n / CONNECTS).toFixed(2),
        reference: 'per connect',
        ratio: '-',
      })),
    {
      name: '  not per connect: pinger Query byBucket (ticks, late reads, presence expiry)',
      value: (ticks / seconds).toFixed(1),
      reference: 'per second',
      ratio: '-',
      extra:
        '8 buckets every LAMBDACABLE_PINGER_TICK_MS (250 ms), one tick in 20 a late read: 32/s; ' +
        'and 8 departure buckets every second (presence expiry): 40/s at most',
    },
  ];
}
