/** One benchmark line. */
export interface BenchResult {
  name: string;
  ops: number;
  ms: number;
  opsPerSec: number;
  ratio?: string;
  extra?: string;
}

/** Runs `fn` once after a warm-up run and times it. */
export function measure(name: string, ops: number, fn: () => void): BenchResult {
  fn();
  const start = process.hrtime.bigint();
  fn();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  return { name, ops, ms, opsPerSec: (ops / ms) * 1000 };
}

/** Times an async `fn` once. */
export async function measureAsync(
  name: string,
  ops: number,
  fn: () => Promise<void>,
): Promise<BenchResult> {
  const start = process.hrtime.bigint();
  await fn();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  return { name, ops, ms, opsPerSec: (ops / ms) * 1000 };
}

/** A deterministic Fisher–Yates shuffle. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed >>> 0;
  const next = () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Prints results as a table. */
export function print(title: string, results: readonly BenchResult[]): void {
  console.log(`\n## ${title}`);
  for (const r of results) {
    const rate = Math.round(r.opsPerSec).toLocaleString('en-US').padStart(14);
    console.log(
      `${r.name.padEnd(58)} ${rate} ops/s  ${r.ms.toFixed(1).padStart(9)} ms${r.ratio ? `  ${r.ratio}` : ''}${r.extra ? `  ${r.extra}` : ''}`,
    );
  }
}

/** One figure beside its reference: `value` against `reference` is `ratio`. */
export interface Figure {
  name: string;
  value: string;
  reference: string;
  ratio: string;
  extra?: string;
}

/** Prints figures as a table: name, value, reference, ratio, then any detail. */
export function printFigures(title: string, figures: readonly Figure[]): void {
  console.log(`\n## ${title}`);
  const width = Math.max(...figures.map((f) => f.name.length), 20);
  const valueWidth = Math.max(...figures.map((f) => f.value.length), 8);
  const refWidth = Math.max(...figures.map((f) => f.reference.length), 8);
  for (const f of figures) {
    console.log(
      `${f.name.padEnd(width)}  ${f.value.padStart(valueWidth)}  vs ${f.reference.padEnd(refWidth)}  ${f.ratio}${f.extra ? `  ${f.extra}` : ''}`,
    );
  }
}
