import { readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PollerInvocation } from '../infra/local/pollers/sqs';
import { freeStackPorts, type LocalStack, startLocalStack } from '../infra/local/stack';
import type { RecordedCall } from '../lib/adapters/aws/call-log';

/** The functions' secrets on the bench's stack. */
export const BENCH_SECRETS = {
  LAMBDACABLE_JWT_SECRET: 'bench-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'bench-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'bench-broadcast-key-0123456789abcdef0123456789',
};
export type BenchSecrets = typeof BENCH_SECRETS;

/** The local stack with everything it does on record. */
export interface BenchStack {
  readonly stack: LocalStack;
  /** Every AWS call of the functions (`LAMBDACABLE_AWS_CALL_LOG`). */
  readonly callLog: CallLog;
  /** Every AWS call of the pollers (the event source mappings). */
  readonly pollerLog: CallLog;
  /** Every invocation the pollers made, in order. */
  readonly invocations: PollerInvocation[];
  /**
   * Every invocation serverless-offline reported (`(λ: wsDefault) … Duration: 12.34 ms`), in
   * order: the WebSocket routes' and the pinger's, which no poller makes.
   */
  readonly offlineInvocations: OfflineInvocation[];
  stop(): Promise<void>;
}

/** One invocation as serverless-offline logs it: the function (its serverless.yml key) and time. */
export interface OfflineInvocation {
  readonly functionName: string;
  readonly ms: number;
}

/** serverless-offline's line after each invocation. */
const OFFLINE_DURATION = /\(λ: (\w+)\) RequestId: \S+\s+Duration: ([\d.]+) ms/;

/** A JSON-lines call log read in segments. */
export class CallLog {
  constructor(readonly file: string) {}

  /** Where the log ends now: calls after this mark are the ones made from now on. */
  mark(): number {
    try {
      return statSync(this.file).size;
    } catch {
      return 0;
    }
  }

  /** The calls recorded between two marks. */
  between(from: number, to: number): RecordedCall[] {
    let text: string;
    try {
      text = readFileSync(this.file).subarray(from, to).toString();
    } catch {
      return [];
    }
    return text
      .split('\n')
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line) as RecordedCall);
  }
}

/**
 * `npm start`'s stack on free ports, recording every AWS call and every invocation; `env`
 * adds settings of the functions (e.g. `LAMBDACABLE_PRESENCE_TTL`).
 */
export async function startBenchStack(
  env: Readonly<Record<string, string>> = {},
): Promise<BenchStack> {
  const run = `${process.pid}-${Date.now()}`;
  const callLog = new CallLog(join(tmpdir(), `lambdacable-bench-calls-${run}.jsonl`));
  const pollerLog = new CallLog(join(tmpdir(), `lambdacable-bench-poller-calls-${run}.jsonl`));
  const invocations: PollerInvocation[] = [];
  const offlineInvocations: OfflineInvocation[] = [];
  let pending = '';
  const stack = await startLocalStack({
    ...freeStackPorts(),
    env: { ...BENCH_SECRETS, ...env, LAMBDACABLE_AWS_CALL_LOG: callLog.file },
    pollerCallLog: pollerLog.file,
    onInvocation: (i) => invocations.push(i),
    onOutput: (text) => {
      const lines = (pending + text).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const m = OFFLINE_DURATION.exec(line);
        if (m) offlineInvocations.push({ functionName: m[1]!, ms: Number(m[2]) });
      }
    },
    output: (process.env.BENCH_OUTPUT as 'inherit' | undefined) ?? 'quiet',
    watch: false,
  });
  return {
    stack,
    callLog,
    pollerLog,
    invocations,
    offlineInvocations,
    async stop() {
      await stack.stop();
      rmSync(callLog.file, { force: true });
      rmSync(pollerLog.file, { force: true });
    },
  };
}

/** `POST /_broadcast` with `items`; throws unless it is accepted. */
export async function broadcastOverHttp(
  stack: LocalStack,
  secrets: BenchSecrets,
  items: readonly { stream: string; data: string }[],
): Promise<void> {
  const res = await fetch(`${stack.httpUrl}/_broadcast`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secrets.LAMBDACABLE_BROADCAST_KEY}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify(items.length === 1 ? items[0] : items),
  });
  if (res.status !== 201) {
    throw new Error(`POST /_broadcast answered ${res.status}: ${await res.text()}`);
  }
}

/** Waits `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
