import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { freePort, LOCAL_HOST } from '../../infra/local/services';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Its own esbuild folder, so other serverless processes building at the same time don't clash. */
const BUILD_DIR = '.esbuild-start-test';
const READY = 'lambdacable is running';
const STARTUP_TIMEOUT_MS = 150_000;
/** How long `npm start` may take to stop once signalled. */
const STOP_TIMEOUT_MS = 30_000;

/** An `npm start` spawned in its own process group, the way a terminal runs a job. */
interface Run {
  readonly npm: ChildProcess;
  readonly ports: Record<string, number>;
  /** Marks every process of this run: all of them inherit it. */
  readonly marker: string;
  output: string;
  readonly closed: Promise<void>;
}

const runs: Run[] = [];
const cleanups: (() => void)[] = [];

afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  // Whatever the outcome, nothing of a run outlives its test.
  for (const run of runs.splice(0)) {
    for (const p of markedProcesses(run.marker)) kill(p.pid, 'SIGKILL');
    if (run.npm.pid !== undefined) kill(-run.npm.pid, 'SIGKILL');
  }
});

/**
 * `npm start` on ports of its own. Another test's process may take one of them between their
 * pick and `npm start`'s listen: then, told so by `npm start`, it starts again on others.
 */
async function startNpm(env: Record<string, string> = {}): Promise<Run> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNpmOnce(env);
    } catch (error) {
      if (attempt >= 3 || !PORT_IN_USE.test(String(error))) throw error;
    }
  }
}

/** What `npm start` says when a port it is given is in use (serverless-offline, the JVM, fauxqs). */
const PORT_IN_USE = /\(LAMBDACABLE_\w+_PORT\) is in use on|Failed to bind to|EADDRINUSE/;

async function startNpmOnce(env: Record<string, string>): Promise<Run> {
  const names = ['WS', 'HTTP', 'LAMBDA', 'DYNAMODB', 'SQS'];
  const ports: Record<string, number> = {};
  // freePort hands a port out once per process.
  for (const name of names) ports[`LAMBDACABLE_${name}_PORT`] = await freePort();
  const marker = `lambdacable-start-test-${randomUUID()}`;
  const npm = spawn('npm', ['start'], {
    cwd: root,
    env: {
      ...process.env,
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      LAMBDACABLE_BUILD_DIR: BUILD_DIR,
      LAMBDACABLE_WATCH: 'off',
      START_TEST_MARKER: marker,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let open = 2;
  let done: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    done = resolve;
  });
  const run: Run = { npm, ports, marker, output: '', closed };
  runs.push(run);
  for (const stream of [npm.stdout, npm.stderr]) {
    stream?.on('data', (chunk: Buffer) => {
      run.output += chunk.toString();
    });
    // The pipes close once every process holding them (the whole tree but the detached
    // serverless-offline and JVM, whose output goes through node) has exited.
    stream?.on('close', () => {
      if (--open === 0) done();
    });
  }
  await until(
    () => run.output.includes(READY) || npm.exitCode !== null,
    STARTUP_TIMEOUT_MS,
    () => `the ready banner; output:\n${run.output}`,
  );
  if (!run.output.includes(READY)) {
    throw new Error(`npm start exited (${npm.exitCode}) before it was ready:\n${run.output}`);
  }
  return run;
}

/** Keeps the functions busy (connect, outbox relay, SQS poller, fan-out) until the test ends. */
/** `npm start` under load, with its process tree and the ports it listens on (all of its own). */
async function startedAndBusy(
  env: Record<string, string> = {},
): Promise<{ run: Run; tree: Proc[]; listening: number[] }> {
  const run = await startNpm(env);
  await keepBusy(run);
  const tree = descendants(run.npm.pid!);
  const listening = listeningPorts(tree);
  expect(listening).toEqual(expect.arrayContaining(Object.values(run.ports)));
  return { run, tree, listening };
}

async function keepBusy(run: Run): Promise<void> {
  const wsUrl = /createCable\('([^']+)'\)/.exec(run.output)?.[1];
  const signed = /streamFromSigned\('([^']+)'\)/.exec(run.output)?.[1];
  const key = /Authorization: Bearer ([^)\s]+)\)/.exec(run.output)?.[1];
  if (!wsUrl || !signed || !key) throw new Error(`no example in the banner:\n${run.output}`);
  const socket = new WebSocket(wsUrl, 'actioncable-v1-ext-json');
  socket.on('error', () => {});
  let running = true;
  cleanups.push(() => {
    running = false;
    socket.terminate();
  });
  await within(new Promise((r) => socket.once('open', r)), 30_000, 'the WebSocket to open');
  socket.send(
    JSON.stringify({
      command: 'subscribe',
      identifier: JSON.stringify({ channel: '$pubsub', signed_stream_name: signed }),
    }),
  );
  const post = async () => {
    for (let n = 0; running; n++) {
      await fetch(`http://${LOCAL_HOST}:${run.ports.LAMBDACABLE_HTTP_PORT}/_broadcast`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ stream: 'demo', data: JSON.stringify({ n }) }),
      })
        .then((r) => r.text())
        .catch(() => new Promise((r) => setTimeout(r, 100)));
    }
  };
  // A broadcast delivered: the relay and the consumer have run their handlers (a CPU profile
  // of their threads then holds their code, not only the thread's start).
  const delivered = new Promise((r) =>
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type?: string; message?: unknown };
      // A broadcast has no type (a ping has one, and a message too).
      if (frame.type === undefined && frame.message !== undefined) r(undefined);
    }),
  );
  for (let i = 0; i < 3; i++) void post();
  await within(delivered, 60_000, 'a broadcast to reach the subscribed socket');
}

describe('npm start', () => {
  it('stops every process it started and frees every port on SIGTERM to npm', async () => {
    const { run, tree, listening } = await startedAndBusy();
    await workersStarted(run);

    const exit = exited(run.npm);
    run.npm.kill('SIGTERM');
    // npm passes SIGTERM to its `sh -c`, which dies of it, and then re-raises it: npm ends
    // at once, killed by SIGTERM. The stack notices npm is gone and stops by itself.
    expect(await within(exit, STOP_TIMEOUT_MS, 'npm to exit')).toEqual({
      code: null,
      signal: 'SIGTERM',
    });
    await expectAllGone(run, tree, listening);
  }, 240_000);

  it('stops every process it started and frees every port on Ctrl-C (SIGINT to its process group), writing a CPU profile of each thread it was asked for', async () => {
    const profiles = mkdtempSync(join(tmpdir(), 'lambdacable-start-prof-'));
    cleanups.push(() => rmSync(profiles, { recursive: true, force: true }));
    const { run, tree, listening } = await startedAndBusy({
      LAMBDACABLE_OFFLINE_CPU_PROF: profiles,
    });
    await workersStarted(run);

    const exit = exited(run.npm);
    process.kill(-run.npm.pid!, 'SIGINT');
    // The script stops the stack and exits 0; npm, which got the SIGINT too, waits for it and
    // then re-raises the signal: it ends killed by SIGINT.
    expect(await within(exit, STOP_TIMEOUT_MS, 'npm to exit')).toEqual({
      code: null,
      signal: 'SIGINT',
    });
    await expectAllGone(run, tree, listening);
    // serverless-offline's thread and the worker threads of the functions (one file each).
    const scripts = readdirSync(profiles).map((f) => {
      const profile = JSON.parse(readFileSync(join(profiles, f), 'utf8')) as {
        nodes: { callFrame: { url: string } }[];
      };
      return new Set(profile.nodes.map((n) => n.callFrame.url));
    });
    const profiled = (pattern: RegExp) =>
      scripts.some((urls) => [...urls].some((u) => pattern.test(u)));
    expect(profiled(/serverless-offline/)).toBe(true);
    for (const fn of ['outbox-relay', 'broadcast', 'pinger']) {
      expect(profiled(new RegExp(`/functions/${fn}\\.mjs`)), fn).toBe(true);
    }
  }, 240_000);
});

/**
 * The functions npm start's pollers and pinger invoke run in worker threads
 * (infra/local/offline/preload.mjs), which say so when they start; {@link keepBusy}'s broadcasts
 * invoke the relay and the consumer, and its subscribed socket gets its welcome from the pinger.
 */
async function workersStarted(run: Run): Promise<void> {
  for (const fn of ['outboxRelay', 'broadcast', 'pinger']) {
    const line = new RegExp(
      `lambdacable-local-${fn}: Lambda instance 1 started in a worker thread`,
    );
    await until(
      () => line.test(run.output),
      60_000,
      () => `${line}; output:\n${run.output}`,
    );
  }
}

async function expectAllGone(run: Run, tree: Proc[], ports: number[]): Promise<void> {
  await within(run.closed, STOP_TIMEOUT_MS, 'the output pipes to close');
  await until(
    () => tree.every((p) => !running(p)),
    STOP_TIMEOUT_MS,
    () => {
      const left = tree.filter(running).map((p) => `${p.pid} ${p.command}`);
      return `every process of the tree to exit; left:\n${left.join('\n')}`;
    },
  );
  expect(markedProcesses(run.marker).map((p) => p.command)).toEqual([]);
  for (const port of ports) expect(await canListen(port), `port ${port} is free`).toBe(true);
  // Failures of work in flight when the stack went down are expected, and quiet.
  const errors = run.output
    .split('\n')
    .filter((line) => /Unhandled|\bError:|^\s+at .+:\d+:\d+\)?$/.test(line));
  expect(errors).toEqual([]);
}

// --- processes, from /proc ------------------------------------------------------------

interface Proc {
  readonly pid: number;
  readonly ppid: number;
  readonly state: string;
  /** Clock ticks after boot: tells a process from a later one with the same pid. */
  readonly startTime: string;
  readonly command: string;
}

function proc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    return {
      pid,
      ppid: Number(fields[1]),
      state: fields[0] ?? '',
      startTime: fields[19] ?? '',
      command: command.slice(0, 160),
    };
  } catch {
    return undefined;
  }
}

function allProcesses(): Proc[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map((name) => proc(Number(name)))
    .filter((p): p is Proc => p !== undefined);
}

/** `pid` and every process below it, by parent pid. */
function descendants(pid: number): Proc[] {
  const all = allProcesses();
  const tree = all.filter((p) => p.pid === pid);
  for (let i = 0; i < tree.length; i++) {
    tree.push(...all.filter((p) => p.ppid === tree[i]!.pid));
  }
  return tree;
}

/** Still there, and not a zombie (a zombie holds nothing; it only waits for its parent). */
function running(p: Proc): boolean {
  const now = proc(p.pid);
  return now !== undefined && now.startTime === p.startTime && now.state !== 'Z';
}

function markedProcesses(marker: string): Proc[] {
  return allProcesses().filter((p) => {
    if (p.pid === process.pid || p.state === 'Z') return false;
    try {
      return readFileSync(`/proc/${p.pid}/environ`, 'utf8').includes(`START_TEST_MARKER=${marker}`);
    } catch {
      return false;
    }
  });
}

/** The TCP ports the processes listen on (their listening sockets, by inode). */
function listeningPorts(procs: Proc[]): number[] {
  const byInode = new Map<string, number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // f[1] is address:port in hex, f[3] the state (0A = LISTEN), f[9] the inode.
      if (f[3] === '0A' && f[1] && f[9])
        byInode.set(f[9], Number.parseInt(f[1].split(':')[1]!, 16));
    }
  }
  const ports = new Set<number>();
  for (const p of procs) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${p.pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${p.pid}/fd/${fd}`))?.[1];
        const port = inode && byInode.get(inode);
        if (port) ports.add(port);
      } catch {
        // closed meanwhile
      }
    }
  }
  return [...ports].sort((a, b) => a - b);
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

// --- helpers ---------------------------------------------------------------------------

function exited(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
    } else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: LOCAL_HOST, port, exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

async function until(probe: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
