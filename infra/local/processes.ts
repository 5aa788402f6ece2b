/** Stopping the child processes of the local stack: their whole group, within a grace period. */

import type { ChildProcess } from 'node:child_process';

/** How long serverless-offline has to halt after SIGTERM before it gets SIGKILL. */
const HALT_TIMEOUT_MS = 5_000;

/** Signals a child and its process group (the processes it started). */
export function killTree(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): void {
  if (hasExited(child) || child.pid === undefined) return;
  try {
    if (process.platform !== 'win32') process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {
    // already gone
  }
}

/** serverless-offline processes told to halt. */
const halting = new WeakSet<ChildProcess>();

/** Whether a child was told to halt (its output is then only what it abandons). */
export function isHalting(child: ChildProcess): boolean {
  return halting.has(child);
}

/** Stops a child: SIGTERM to its group, SIGKILL after {@link HALT_TIMEOUT_MS}. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  halting.add(child);
  killTree(child, 'SIGTERM');
  const timer = setTimeout(() => {
    console.error(`serverless offline did not halt within ${HALT_TIMEOUT_MS} ms; killing it`);
    killTree(child, 'SIGKILL');
  }, HALT_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** Whether a child has exited. */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Resolves when `promise` settles or `ms` have passed, whichever is first. */
export async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}
