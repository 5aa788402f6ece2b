import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import ts from 'typescript';

/**
 * The repository's sources as the architecture rules read them: files, the relative imports
 * between them (static, dynamic, `require`, re-exports, type-only included), and what a
 * module does when it is imported.
 */

const SOURCE = /\.(ts|mts|mjs|cjs)$/;

/** Every source file below `dir` (or `dir` itself), as a path from the repository root. */
export function sourceFiles(dir: string): string[] {
  if (SOURCE.test(dir)) return [dir];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sourceFiles(join(dir, e.name))
      : SOURCE.test(e.name) && !e.name.endsWith('.d.ts') && !e.name.endsWith('.d.mts')
        ? [join(dir, e.name)]
        : [],
  );
}

/** The module specifiers a file imports or re-exports (static and dynamic). */
export function importSpecifiers(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const found = source.matchAll(/(?:from|import|require)\s*\(?\s*['"]([^'"]+)['"]/g);
  return [...found].map((m) => m[1]!);
}

/** A relative specifier as a path from the repository root, without its extension. */
export function importTarget(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const path = normalize(join(dirname(file), specifier)).replace(/\.(js|ts|mjs|cjs|mts)$/, '');
  return relative('.', path);
}

/** The file a relative specifier resolves to, when it is one of the repository's sources. */
export function resolveImport(file: string, specifier: string): string | undefined {
  const base = importTarget(file, specifier);
  if (base === undefined) return undefined;
  for (const ext of ['.ts', '.mts', '.mjs', '.cjs']) {
    if (existsSync(base + ext)) return base + ext;
  }
  const index = join(base, 'index.ts');
  return existsSync(base) && statSync(base).isDirectory() && existsSync(index) ? index : undefined;
}

/** File → the files it imports, over `dirs`. */
export function importGraph(dirs: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of dirs.flatMap((d) => sourceFiles(d))) {
    const to = importSpecifiers(file)
      .map((s) => resolveImport(file, s))
      .filter((t): t is string => t !== undefined);
    graph.set(file, [...new Set(to)]);
  }
  return graph;
}

/**
 * The import cycles of a graph: each strongly connected component of more than one file (or
 * a file that imports itself), as its files sorted (Tarjan's algorithm).
 */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
}

/**
 * The lines where a module reads `process.env` while it is being imported: outside any
 * function, method, accessor or class property initializer (which run later, when called).
 */
export function envReadsAtImport(file: string): number[] {
  const sf = parse(file);
  const lines: number[] = [];
  const walk = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) || ts.isPropertyDeclaration(node)) return;
    if (
      ts.isPropertyAccessExpression(node) &&
      node.name.text === 'env' &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'process'
    ) {
      lines.push(sf.getLineAndCharacterOfPosition(node.getStart()).line + 1);
    }
    ts.forEachChild(node, walk);
  };
  walk(sf);
  return lines;
}

/**
 * What a ports file holds besides imports, interfaces and type aliases (`kind name`), and the
 * members of its interfaces' methods without a doc comment (`Interface.method`).
 */
export function portsFileProblems(file: string): string[] {
  const sf = parse(file);
  const problems: string[] = [];
  for (const statement of sf.statements) {
    if (ts.isImportDeclaration(statement) || ts.isTypeAliasDeclaration(statement)) continue;
    if (!ts.isInterfaceDeclaration(statement)) {
      problems.push(`${ts.SyntaxKind[statement.kind]} at line ${line(sf, statement)}`);
      continue;
    }
    for (const member of statement.members) {
      if (!ts.isMethodSignature(member)) continue;
      if (ts.getJSDocCommentsAndTags(member).length === 0) {
        problems.push(`${statement.name.text}.${member.name.getText(sf)} has no doc comment`);
      }
    }
  }
  return problems;
}

/** The classes a file declares with the interfaces they implement: `[class, port]` pairs. */
export function implementations(file: string): [string, string][] {
  const sf = parse(file);
  const pairs: [string, string][] = [];
  for (const statement of sf.statements) {
    if (!ts.isClassDeclaration(statement) || !statement.name) continue;
    for (const clause of statement.heritageClauses ?? []) {
      if (clause.token !== ts.SyntaxKind.ImplementsKeyword) continue;
      for (const type of clause.types)
        pairs.push([statement.name.text, type.expression.getText(sf)]);
    }
  }
  return pairs;
}

function line(sf: ts.SourceFile, node: ts.Node): number {
  return sf.getLineAndCharacterOfPosition(node.getStart()).line + 1;
}
