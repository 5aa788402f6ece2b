import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The functions' memory (MB) from serverless.yml: the provider's, or a function's own. */
export function memoryOf(functionName: string, yml = readServerlessYml()): number {
  let provider = 128;
  let current: string | undefined;
  let inFunctions = false;
  let own: number | undefined;
  for (const line of yml.split('\n')) {
    if (/^\S/.test(line)) inFunctions = line.startsWith('functions:');
    const top = /^ {2}memorySize:\s*(\d+)/.exec(line);
    if (top && !inFunctions) provider = Number(top[1]);
    const fn = inFunctions ? /^ {2}(\w+):\s*$/.exec(line) : null;
    if (fn) current = fn[1];
    const mine = inFunctions ? /^ {4}memorySize:\s*(\d+)/.exec(line) : null;
    if (mine && current === functionName) own = Number(mine[1]);
  }
  return own ?? provider;
}

function readServerlessYml(): string {
  return readFileSync(join(import.meta.dirname, '..', 'serverless.yml'), 'utf8');
}
