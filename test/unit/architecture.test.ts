import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/** The pure core: no AWS SDK, no Lambda types, no AWS adapter (nor the aws entry point). */
const CORE = [
  'lib/core.ts',
  'lib/testing.ts',
  'lib/kernel',
  'lib/messaging',
  'lib/events',
  'lib/outbox',
  'lib/broker',
  'lib/realtime',
  'lib/adapters/memory',
];
/** The package's entry points: what `functions/` may import from `lib/`. */
const ENTRY_POINTS = ['lib/core.ts', 'lib/aws.ts'];
/** A file in `lib/` longer than this does more than one job. */
const MAX_LIB_LINES = 400;

function files(dir: string): string[] {
  if (/\.(ts|mts|mjs|cjs)$/.test(dir)) return [dir];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? files(join(dir, e.name))
      : /\.(ts|mts|mjs|cjs)$/.test(e.name)
        ? [join(dir, e.name)]
        : [],
  );
}

/** The module specifiers a file imports or re-exports (static and dynamic). */
function imports(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const found = source.matchAll(/(?:from|import|require)\s*\(?\s*['"]([^'"]+)['"]/g);
  return [...found].map((m) => m[1]!);
}

/** A relative specifier as a path from the repository root, without its extension. */
function target(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const path = normalize(join(dirname(file), specifier)).replace(/\.(js|ts|mjs|cjs)$/, '');
  return relative('.', path);
}

function offenders(dirs: readonly string[], bad: (file: string, spec: string) => boolean) {
  return dirs
    .flatMap((d) => files(d))
    .flatMap((f) => imports(f).map((spec) => ({ f, spec })))
    .filter(({ f, spec }) => bad(f, spec))
    .map(({ f, spec }) => `${f} imports ${spec}`);
}

describe('the architecture', () => {
  it('keeps the AWS SDK, aws-lambda and the AWS adapters out of the pure core', () => {
    const found = offenders(CORE, (f, spec) => {
      const to = target(f, spec);
      const aws = to !== undefined && (to.startsWith('lib/adapters/aws') || to === 'lib/aws');
      return /^(@aws-sdk\/|aws-lambda$)/.test(spec) || aws;
    });
    expect(found).toEqual([]);
  });

  it('keeps process.env out of the library', () => {
    const found = files('lib').filter((f) => readFileSync(f, 'utf8').includes('process.env'));
    expect(found).toEqual([]);
  });

  it('keeps every file of lib/ at one job: at most about 400 lines', () => {
    const long = files('lib')
      .map((f) => ({ f, lines: readFileSync(f, 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > MAX_LIB_LINES)
      .map(({ f, lines }) => `${f}: ${lines} lines`);
    expect(long).toEqual([]);
  });

  it('lets functions/ import only the package entry points, infra/deploy and each other', () => {
    const found = offenders(['functions'], (f, spec) => {
      const to = target(f, spec);
      if (to === undefined) return false;
      return !(
        ENTRY_POINTS.includes(`${to}.ts`) ||
        to.startsWith('infra/deploy/') ||
        to.startsWith('functions/')
      );
    });
    expect(found).toEqual([]);
  });

  it('never lets deployed code (lib/, functions/, infra/deploy/) import a local-stack, bench or test tool', () => {
    const found = offenders(['lib', 'functions', 'infra/deploy'], (f, spec) => {
      const to = target(f, spec);
      return to !== undefined && /^(infra\/local|bench|test)\//.test(to);
    });
    expect(found).toEqual([]);
  });

  it('keeps lib/ free of the functions and of infra/', () => {
    const found = offenders(['lib'], (f, spec) => {
      const to = target(f, spec);
      return to !== undefined && /^(functions|infra)\//.test(to);
    });
    expect(found).toEqual([]);
  });

  it('throws only LambdacableErrors from deployed code (no bare Error, RangeError, TypeError)', () => {
    const found = ['lib', 'functions', 'infra/deploy']
      .flatMap((d) => files(d))
      .filter((f) => /new (Range|Type|Syntax)?Error\(/.test(readFileSync(f, 'utf8')));
    expect(found).toEqual([]);
  });

  it('finds what it checks (the rules above read real files)', () => {
    expect(files('lib').length).toBeGreaterThan(40);
    expect(imports('functions/runtime.ts').length).toBeGreaterThan(3);
    expect(target('functions/runtime.ts', '../lib/core')).toBe('lib/core');
  });
});
