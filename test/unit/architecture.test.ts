import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const CORE = ['broker', 'events', 'gateway', 'memory', 'messaging', 'outbox'];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('the hexagon', () => {
  it('keeps the AWS SDK and aws-lambda out of the pure core', () => {
    const offenders = CORE.flatMap((d) => files(join('lib', d))).filter((f) =>
      /from '(@aws-sdk\/|aws-lambda|\.\.\/adapters|\.\.\/\.\.\/adapters)/.test(
        readFileSync(f, 'utf8'),
      ),
    );
    expect(offenders).toEqual([]);
  });

  it('keeps process.env out of the library', () => {
    const offenders = files('lib').filter((f) => readFileSync(f, 'utf8').includes('process.env'));
    expect(offenders).toEqual([]);
  });
});
