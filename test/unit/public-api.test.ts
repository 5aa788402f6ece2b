import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as aws from '../../lib/aws';
import * as core from '../../lib/core';
import * as testing from '../../lib/testing';

const ENTRIES = {
  lambdacable: { file: 'lib/core.ts', values: core },
  'lambdacable/aws': { file: 'lib/aws.ts', values: aws },
  'lambdacable/testing': { file: 'lib/testing.ts', values: testing },
} as const;

/** The names an entry point exports: its values at run time, its types from its source. */
function exported(entry: keyof typeof ENTRIES): string[] {
  const { file, values } = ENTRIES[entry];
  const source = readFileSync(file, 'utf8');
  const types = [...source.matchAll(/\btype (\w+)/g)].map((m) => m[1]!);
  for (const block of source.matchAll(/export type \{([^}]*)\}/g)) {
    types.push(...block[1]!.split(',').map((n) => n.trim()));
  }
  return [...new Set([...Object.keys(values), ...types.filter(Boolean)])].sort();
}

/** The page that lists the public API, a heading per entry point. */
const API_PAGE = 'docs/api.md';

/** The names the API page lists under an entry point's heading. */
function documented(entry: keyof typeof ENTRIES): string[] {
  const api = readFileSync(API_PAGE, 'utf8');
  const start = api.indexOf(`\n## \`${entry}\``);
  expect(start, `${API_PAGE} has a heading for ${entry}`).toBeGreaterThan(0);
  const end = api.indexOf('\n## ', start + 1);
  const text = api
    .slice(start, end < 0 ? undefined : end)
    .split('\n')
    .slice(2)
    .join('\n');
  return [...new Set([...text.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1]!))]
    .filter((n) => !/^LAMBDACABLE_/.test(n))
    .sort();
}

describe('the public API', () => {
  for (const entry of Object.keys(ENTRIES) as (keyof typeof ENTRIES)[]) {
    it(`lists in docs/api.md exactly what ${entry} exports`, () => {
      expect(documented(entry)).toEqual(exported(entry));
    });
  }

  it('keeps internals out of every entry point', () => {
    const all = Object.keys(ENTRIES).flatMap((e) => exported(e as keyof typeof ENTRIES));
    for (const internal of [
      'disconnectGone',
      'forEachConcurrently',
      'broadcastFrame',
      'historyFromRetained',
      'outboxItem',
      'awsCall',
      'utf8Bytes',
      'Session',
    ]) {
      expect(all).not.toContain(internal);
    }
  });

  it('points main, types and exports["."] at the same entry', () => {
    const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
      main: string;
      types: string;
      exports: Record<string, { types: string; default: string }>;
    };
    expect(manifest.main).toBe(manifest.exports['.']!.default);
    expect(manifest.types).toBe(manifest.exports['.']!.types);
  });
});
