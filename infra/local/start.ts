/**
 * `npm start`: the whole system on 127.0.0.1 (see infra/local/stack.ts). Prints the
 * endpoints and a ready-to-use example. Ctrl-C or SIGTERM (to npm or to this process) stops
 * every process it started, in order; a second one stops them at once.
 */
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { createConnectToken, signStreamName } from '../../lib/core';
import { type LocalStack, startLocalStack } from './stack';

/** A repeat within this window is the same signal passed on again by tsx, not a second one. */
const REPEAT_GRACE_MS = 1_000;
/** How often to check that the processes npm runs this one through are still there. */
const LAUNCHER_POLL_MS = 500;

const DEV_DEFAULTS: Record<string, string> = {
  LAMBDACABLE_JWT_SECRET: 'local-jwt-secret-0123456789abcdef0123456789',
  LAMBDACABLE_STREAMS_SECRET: 'local-streams-secret-0123456789abcdef0123456789',
  LAMBDACABLE_BROADCAST_KEY: 'local-broadcast-key-0123456789abcdef0123456789',
};

/** The functions' environment: the development secrets, then every LAMBDACABLE_ setting of `from`. */
function functionsEnvironment(from: Readonly<Record<string, string | undefined>>) {
  const out: Record<string, string> = {};
  for (const [name, fallback] of Object.entries(DEV_DEFAULTS)) out[name] = from[name] || fallback;
  for (const [name, value] of Object.entries(from)) {
    if (name.startsWith('LAMBDACABLE_') && value !== undefined) out[name] = value;
  }
  return out;
}

const env = functionsEnvironment(process.env);

let stack: LocalStack | undefined;
let stopRequestedAt: number | undefined;

/**
 * Stops the stack and exits. Before the stack is up, or on a second request, it exits at
 * once: the exit hooks of infra/local/offline/launch.ts and infra/local/services.ts then kill
 * serverless-offline and DynamoDB Local outright.
 */
function requestStop(reason: string, exitCode: number): void {
  if (stopRequestedAt !== undefined) {
    // tsx passes a Ctrl-C on to this process once more when it did not see it arrive here.
    if (Date.now() - stopRequestedAt < REPEAT_GRACE_MS) return;
    console.log(`\nlambdacable: ${reason} again, stopping at once`);
    process.exit(exitCode);
  }
  stopRequestedAt = Date.now();
  if (!stack) {
    console.log(`\nlambdacable: ${reason} while starting, stopping at once`);
    process.exit(exitCode);
  }
  console.log(`\nlambdacable: ${reason}, stopping ...`);
  stack.stop().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error('lambdacable: could not stop cleanly', error);
      process.exit(1);
    },
  );
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => requestStop(signal, 128 + constants.signals[signal]));
}
watchLaunchers(() => {
  // A Ctrl-C may take npm's `sh -c` down while the stack stops: that is no second request.
  if (stopRequestedAt === undefined) requestStop('npm exited', 0);
});

console.log('lambdacable: starting DynamoDB Local, fauxqs and serverless-offline on 127.0.0.1 ...');
// The example consumer (functions/consumers/audit.ts) runs unless LAMBDACABLE_EXAMPLE_CONSUMER=false.
stack = await startLocalStack({
  env,
  exampleConsumer: env.LAMBDACABLE_EXAMPLE_CONSUMER !== 'false',
});
const token = await createConnectToken(
  { sub: 'demo-user', ttlSeconds: 3600 },
  env.LAMBDACABLE_JWT_SECRET!,
);
const signed = signStreamName('demo', env.LAMBDACABLE_STREAMS_SECRET!);

console.log(`
lambdacable is running (stage "local"):
  WebSocket   ${stack.wsUrl}   (subprotocol actioncable-v1-ext-json)
  Broadcast   POST ${stack.httpUrl}/_broadcast   (Authorization: Bearer ${env.LAMBDACABLE_BROADCAST_KEY})
  DynamoDB    ${stack.dynamodbEndpoint}   SQS ${stack.sqsEndpoint}

Connect a client (@anycable/web or @anycable/core):
  createCable('${stack.wsUrl}?jid=${token}')
  cable.streamFromSigned('${signed}')       // the stream "demo"

Broadcast to it, over HTTP:
  curl -X POST ${stack.httpUrl}/_broadcast -H 'Authorization: Bearer ${env.LAMBDACABLE_BROADCAST_KEY}' \\
    -d '{"stream":"demo","data":"{\\"text\\":\\"hello\\"}"}'
or from a service transaction:
  npm run demo:publish -- --stream demo --data '{"text":"hello"}'
${
  stack.resources.queues.audit
    ? `
Your own consumer, by example: every broadcast also reaches the group "audit"
(functions/consumers/audit.ts), which logs an "audit broadcast" line for it.
`
    : ''
}
What a deployed alarm would catch prints a "lambdacable ALARM ..." line here (a message in a
DLQ or relay-failures, the relay falling behind, undelivered frames): docs/operations.md.

Ctrl-C stops everything.`);

/**
 * Calls `gone` once any of the processes that `npm start` runs this one through (tsx, npm's
 * `sh -c`, npm) is gone. npm passes a SIGTERM on only to its `sh -c`, and a shell such as
 * dash dies of it without passing it on, so this process would never hear of it. Linux only
 * (it reads /proc); elsewhere, and when not run by npm, it watches nothing.
 */
function watchLaunchers(gone: () => void): void {
  const lifecycle = process.env.npm_lifecycle_event;
  if (!lifecycle || process.platform !== 'linux') return;
  const launchers: ProcStat[] = [];
  for (let pid = process.ppid; pid > 1 && launchers.length < 8; ) {
    const stat = procStat(pid);
    if (!stat) break;
    launchers.push(stat);
    // npm is the nearest ancestor that npm did not start for this script.
    if (!procEnviron(pid).includes(`npm_lifecycle_event=${lifecycle}`)) break;
    pid = stat.ppid;
  }
  if (launchers.length === 0) return;
  const timer = setInterval(() => {
    const alive = (l: ProcStat) => {
      const now = procStat(l.pid);
      return now !== undefined && now.state !== 'Z' && now.startTime === l.startTime;
    };
    if (launchers.every(alive)) return;
    clearInterval(timer);
    gone();
  }, LAUNCHER_POLL_MS);
  timer.unref();
}

interface ProcStat {
  readonly pid: number;
  readonly state: string;
  readonly ppid: number;
  /** Clock ticks after boot: tells a process from a later one with the same pid. */
  readonly startTime: string;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name, in parentheses, may itself contain spaces and parentheses.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid, state: fields[0] ?? '', ppid: Number(fields[1]), startTime: fields[19] ?? '' };
  } catch {
    return undefined;
  }
}

function procEnviron(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}
