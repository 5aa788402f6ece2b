import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  envReadsAtImport,
  implementations,
  importCycles,
  importGraph,
  importSpecifiers,
  importTarget,
  portsFileProblems,
  sourceFiles,
} from '../helpers/source-graph';

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
/** Every folder of code: the library, the functions, deploy and local tooling, the bench. */
const CODE = ['lib', 'functions', 'infra', 'bench'];
/** A file longer than this does more than one job. */
const MAX_LINES = 400;
/** Test helpers that are data (tables of expectations), allowed to be longer. */
const DATA_HELPERS = ['test/helpers/template-spec.ts'];
/** The realtime root: only what every room shares. */
const REALTIME = 'lib/realtime';
const REALTIME_ROOT = [
  'compose.ts',
  'config.ts',
  'gone.ts',
  'ports.ts',
  'protocol.ts',
  'session.ts',
];
/** The module with the names deploy, the local stack and the functions share. */
const NAMES = 'infra/deploy/names.ts';

function offenders(dirs: readonly string[], bad: (file: string, spec: string) => boolean) {
  return dirs
    .flatMap((d) => sourceFiles(d))
    .flatMap((f) => importSpecifiers(f).map((spec) => ({ f, spec })))
    .filter(({ f, spec }) => bad(f, spec))
    .map(({ f, spec }) => `${f} imports ${spec}`);
}

function lineCount(file: string): number {
  return readFileSync(file, 'utf8').split('\n').length;
}

function rooms(): string[] {
  return readdirSync(REALTIME, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => join(REALTIME, e.name));
}

describe('the architecture', () => {
  it('keeps the AWS SDK, aws-lambda and the AWS adapters out of the pure core', () => {
    const found = offenders(CORE, (f, spec) => {
      const to = importTarget(f, spec);
      const aws = to !== undefined && (to.startsWith('lib/adapters/aws') || to === 'lib/aws');
      return /^(@aws-sdk\/|aws-lambda$)/.test(spec) || aws;
    });
    expect(found).toEqual([]);
  });

  it('keeps process.env out of the library', () => {
    const found = sourceFiles('lib').filter((f) => readFileSync(f, 'utf8').includes('process.env'));
    expect(found).toEqual([]);
  });

  it('reads process.env in no module while it is imported (only entry scripts read it at top level)', () => {
    const graph = importGraph(CODE);
    const imported = new Set([...graph.values()].flat());
    const found = [...imported]
      .map((f) => ({ f, lines: envReadsAtImport(f) }))
      .filter(({ lines }) => lines.length > 0)
      .map(({ f, lines }) => `${f}: line ${lines.join(', ')}`);
    expect(found).toEqual([]);
  });

  it('has no import cycle in lib/, functions/, infra/ or bench/ (type-only imports count)', () => {
    expect(importCycles(importGraph(CODE))).toEqual([]);
  });

  it('keeps every file of lib/, functions/, infra/ and bench/ at one job: at most 400 lines', () => {
    const long = CODE.flatMap((d) => sourceFiles(d))
      .map((f) => ({ f, lines: lineCount(f) }))
      .filter(({ lines }) => lines > MAX_LINES)
      .map(({ f, lines }) => `${f}: ${lines} lines`);
    expect(long).toEqual([]);
  });

  it('keeps test helpers at 400 lines too, unless they are data', () => {
    const long = sourceFiles('test/helpers')
      .filter((f) => !DATA_HELPERS.includes(f) && lineCount(f) > MAX_LINES)
      .map((f) => `${f}: ${lineCount(f)} lines`);
    expect(long).toEqual([]);
  });

  it('lets functions/ import only the package entry points, infra/deploy and each other', () => {
    const found = offenders(['functions'], (f, spec) => {
      const to = importTarget(f, spec);
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
      const to = importTarget(f, spec);
      return to !== undefined && /^(infra\/local|bench|test)\//.test(to);
    });
    expect(found).toEqual([]);
  });

  it('keeps lib/ free of the functions and of infra/', () => {
    const found = offenders(['lib'], (f, spec) => {
      const to = importTarget(f, spec);
      return to !== undefined && /^(functions|infra)\//.test(to);
    });
    expect(found).toEqual([]);
  });

  it('keeps the shared names (env vars, physical and logical names) in a module that imports nothing', () => {
    expect(importSpecifiers(NAMES)).toEqual([]);
    const users = [...importGraph(CODE)].filter(([, to]) => to.includes(NAMES)).map(([f]) => f);
    expect(users.some((f) => f.startsWith('functions/'))).toBe(true);
    expect(users.some((f) => f.startsWith('infra/local/'))).toBe(true);
    expect(users.some((f) => f.startsWith('infra/deploy/'))).toBe(true);
  });

  it('throws only LambdacableErrors from deployed code (no bare Error, RangeError, TypeError)', () => {
    const found = ['lib', 'functions', 'infra/deploy']
      .flatMap((d) => sourceFiles(d))
      .filter((f) => /new (Range|Type|Syntax)?Error\(/.test(readFileSync(f, 'utf8')));
    expect(found).toEqual([]);
  });
});

describe('the realtime rooms', () => {
  it('keeps in the realtime root only the protocol, the connection ports, the composition and the combined config', () => {
    const root = readdirSync(REALTIME, { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name)
      .sort();
    expect(root).toEqual(REALTIME_ROOT);
  });

  it('gives each room one concept: 3 to 9 files, its settings in settings.ts', () => {
    const found = rooms().flatMap((room) => {
      const names = readdirSync(room);
      const problems: string[] = [];
      if (names.length < 3 || names.length > 9) problems.push(`${room}: ${names.length} files`);
      if (!names.includes('settings.ts')) problems.push(`${room}: no settings.ts`);
      return problems;
    });
    expect(found).toEqual([]);
    expect(rooms().length).toBeGreaterThanOrEqual(6);
  });

  it('builds the combined config from every room settings file', () => {
    const combined = importGraph([join(REALTIME, 'config.ts')]).get(join(REALTIME, 'config.ts'));
    const settings = rooms().map((room) => join(room, 'settings.ts'));
    expect(settings.filter((s) => !combined?.includes(s))).toEqual([]);
  });

  it('documents every setting of a room with its default', () => {
    const undocumented = rooms().flatMap((room) => {
      const source = readFileSync(join(room, 'settings.ts'), 'utf8');
      const configs = [...source.matchAll(/export interface (\w+Config) \{([\s\S]*?)\n\}/g)];
      return configs.flatMap(([, name, body]) =>
        body!
          .split(/\n(?=\s*\/\*\*)/)
          .filter((field) => /readonly \w+/.test(field) && !field.includes('@default'))
          .map((field) => `${room}/settings.ts ${name}.${/readonly (\w+)/.exec(field)![1]}`),
      );
    });
    expect(undocumented).toEqual([]);
  });

  it('declares ports as interfaces only, each method with a comment', () => {
    const portsFiles = sourceFiles('lib').filter((f) => basename(f) === 'ports.ts');
    expect(portsFiles.length).toBeGreaterThanOrEqual(5);
    const found = portsFiles.flatMap((f) => portsFileProblems(f).map((p) => `${f}: ${p}`));
    expect(found).toEqual([]);
  });
});

describe('the adapters', () => {
  const memory = sourceFiles('lib/adapters/memory').flatMap((f) =>
    implementations(f).map(([cls, port]) => ({ f, cls, port })),
  );
  const aws = sourceFiles('lib/adapters/aws').flatMap((f) =>
    implementations(f).map(([cls, port]) => ({ f, cls, port })),
  );

  it('names each memory twin after its port, as its AWS twin is named', () => {
    const mismatched = memory.flatMap(({ f, cls, port }) =>
      aws
        .filter((a) => a.port === port && basename(a.f) !== basename(f))
        .map((a) => `${cls} (${f}) and ${a.cls} (${a.f}) implement ${port}`),
    );
    expect(mismatched).toEqual([]);
    expect(memory.filter(({ port }) => aws.some((a) => a.port === port)).length).toBeGreaterThan(
      10,
    );
  });

  it('keeps every in-memory implementation of a port in adapters/memory', () => {
    const found = sourceFiles('lib')
      .filter((f) => !f.startsWith('lib/adapters/memory/'))
      .flatMap((f) => implementations(f).map(([cls]) => `${f}: ${cls}`))
      .filter((s) => /: Memory/.test(s));
    expect(found).toEqual([]);
  });
});

describe('the rules themselves', () => {
  it('read real files', () => {
    expect(sourceFiles('lib').length).toBeGreaterThan(40);
    expect(importSpecifiers('functions/ws-default.ts').length).toBeGreaterThan(1);
    expect(importTarget('functions/ws-default.ts', '../lib/core')).toBe('lib/core');
  });

  it('find an import cycle, a type-only one too, and an import-time env read when there is one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cycle-'));
    try {
      const at = relative('.', dir);
      writeFileSync(join(dir, 'a.ts'), "import { b } from './b.js';\nexport const a = b;\n");
      writeFileSync(join(dir, 'b.ts'), "import type { C } from './c.js';\nexport const b = 1;\n");
      writeFileSync(
        join(dir, 'c.ts'),
        "import { a } from './a.js';\nexport type C = typeof a;\nexport const port = process.env.PORT;\n",
      );
      writeFileSync(join(dir, 'd.ts'), 'export function f() {\n  return process.env.PORT;\n}\n');
      const cycles = importCycles(importGraph([at]));
      expect(cycles).toEqual([['a.ts', 'b.ts', 'c.ts'].map((n) => join(at, n))]);
      expect(envReadsAtImport(join(at, 'c.ts'))).toEqual([3]);
      expect(envReadsAtImport(join(at, 'd.ts'))).toEqual([]);
      writeFileSync(join(dir, 'b.ts'), 'export const b = 1;\n');
      expect(importCycles(importGraph([at]))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('find what a ports file must not hold', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ports-'));
    try {
      const file = join(dir, 'ports.ts');
      writeFileSync(
        file,
        'export interface P {\n  /** Does it. */\n  a(): void;\n  b(): void;\n}\nexport const x = 1;\n',
      );
      expect(portsFileProblems(file)).toEqual([
        'P.b has no doc comment',
        'FirstStatement at line 6',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(dirname(NAMES)).toBe('infra/deploy');
  });
});
