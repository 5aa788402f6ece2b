import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';

/** The front door and the reference pages it links to. */
const README = 'README.md';
const DOCS = 'docs';
/** The README is the front door: what, quick start, a picture, links (issue 32). */
const MAX_README_LINES = 250;

function pages(): string[] {
  const docs = readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => join(DOCS, f));
  return [README, ...docs];
}

/** A page's lines outside fenced code blocks, with their 1-based line numbers. */
function prose(markdown: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((text, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(text)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return;
    }
    if (fence === undefined) out.push({ line: i + 1, text });
  });
  return out;
}

/**
 * GitHub's anchor for a heading's text: links keep their text, then lowercase, drop every
 * character but letters, digits, `_`, `-` and spaces, and make each space a hyphen.
 */
function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings; a repeated one gets -1, -2, … as on GitHub. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const { text } of prose(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  return found;
}

interface Link {
  page: string;
  line: number;
  target: string;
}

/**
 * A page's text with fenced code blocks emptied and inline code (which may span lines and
 * hold brackets and parentheses that are no link) blanked, line for line.
 */
function linkable(markdown: string): string {
  const kept = new Map(prose(markdown).map(({ line, text }) => [line, text]));
  return markdown
    .split('\n')
    .map((_, i) => kept.get(i + 1) ?? '')
    .join('\n')
    .replace(/(`+)[\s\S]*?\1/g, (code) => code.replace(/[^\n]/g, ' '));
}

/** Every inline link and image of a page that is not a URL with a scheme. */
function relativeLinks(page: string): Link[] {
  const text = linkable(readFileSync(page, 'utf8'));
  const links: Link[] = [];
  for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const line = text.slice(0, m.index).split('\n').length;
    links.push({ page, line, target });
  }
  return links;
}

/** Why a link does not resolve, or undefined when it does. */
function broken({ page, target }: Link): string | undefined {
  const hash = target.indexOf('#');
  const path = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
  if (!existsSync(file)) return `${file} does not exist`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return `an anchor on ${file}, which is no markdown page`;
  if (!anchors(readFileSync(file, 'utf8')).has(anchor)) return `${file} has no heading #${anchor}`;
  return undefined;
}

describe('the docs', () => {
  it('computes anchors as GitHub does', () => {
    expect(slug('Benchmarks (`npm run bench`)')).toBe('benchmarks-npm-run-bench');
    expect(slug('`<Group>DlqAlarm`: a message was dead-lettered')).toBe(
      'groupdlqalarm-a-message-was-dead-lettered',
    );
    expect(slug('`lambdacable/aws` (adapters on the AWS SDK v3)')).toBe(
      'lambdacableaws-adapters-on-the-aws-sdk-v3',
    );
    expect(slug('What `npm start` runs')).toBe('what-npm-start-runs');
    expect(slug('a [linked](x.md) name_with-marks')).toBe('a-linked-name_with-marks');
    expect([
      ...anchors('# Usage\n\n## Usage\n\n```sh\n# not a heading\n```\n\n### Usage\n'),
    ]).toEqual(['usage', 'usage-1', 'usage-2']);
  });

  it('finds the links of a page, not the brackets of its code', () => {
    const page = 'see [x](a.md)\n```ts\n[y](b.md)\n```\nand `[z](c.md)` or `two\nlines [w](d.md)`';
    expect([...linkable(page).matchAll(/\]\(([^)]*)\)/g)].map((m) => m[1])).toEqual(['a.md']);
    expect(linkable(page).split('\n')).toHaveLength(page.split('\n').length);
  });

  it('resolves every relative link and anchor of README.md and docs/*.md', () => {
    const links = pages().flatMap(relativeLinks);
    expect(links.length).toBeGreaterThan(50);
    const failures = links.flatMap((link) => {
      const why = broken(link);
      return why === undefined ? [] : [`${link.page}:${link.line} (${link.target}): ${why}`];
    });
    expect(failures).toEqual([]);
  });

  it('links every docs page from the README', () => {
    const linked = new Set(
      relativeLinks(README).map((l) => normalize(l.target.replace(/#.*$/, ''))),
    );
    const unlinked = pages()
      .filter((p) => p !== README)
      .filter((p) => !linked.has(p));
    expect(unlinked).toEqual([]);
  });

  it(`keeps the README at most ${MAX_README_LINES} lines`, () => {
    const lines = readFileSync(README, 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(MAX_README_LINES);
  });
});
