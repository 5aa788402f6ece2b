/**
 * `npm run package`: `serverless package` (offline, no AWS credentials needed), then each
 * function's artifact: its zipped size, the size of its minified bundle, and whether it
 * stays within the budget. Extra arguments go to `serverless package`
 * (default `--stage dev`).
 */
import { spawnSync } from 'node:child_process';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LambdacableError } from '../../lib/core';

/**
 * The minified bundle a function should stay within, with the SDK from the runtime (192 KiB
 * since broadcast took remote revocations and DLQ parking, httpBroadcast Powertools
 * Idempotency and the functions with secrets Powertools Parameters; 224 KiB since wsDefault
 * and the pinger write presence events: the Avro encoder and the event sender, ~12 KiB; 228 KiB
 * since remote unsubscribes are targeted and wait out the stream index, which wsDefault's
 * fan-out bundles, ~1 KiB).
 */
export const BUNDLE_BUDGET_BYTES = 228 * 1024;

/** One function's artifact. */
export interface ArtifactSize {
  readonly function: string;
  readonly zipBytes: number;
  /** Uncompressed bytes of every file in the zip. */
  readonly unzippedBytes: number;
  readonly files: readonly string[];
}

/** Sizes of the function zips in a `serverless package` folder. */
export async function artifactSizes(dir: string): Promise<ArtifactSize[]> {
  const out: ArtifactSize[] = [];
  for (const name of (await readdir(dir)).filter((f) => f.endsWith('.zip')).sort()) {
    const path = join(dir, name);
    const entries = zipEntries(await readFile(path));
    out.push({
      function: name.replace(/\.zip$/, ''),
      zipBytes: (await stat(path)).size,
      unzippedBytes: entries.reduce((sum, e) => sum + e.size, 0),
      files: entries.map((e) => e.name),
    });
  }
  return out;
}

/** The central directory of a zip: file names and uncompressed sizes. */
function zipEntries(zip: Buffer): { name: string; size: number }[] {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) throw new LambdacableError('not a zip file: no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  let offset = zip.readUInt32LE(end + 16);
  const entries: { name: string; size: number }[] = [];
  for (let i = 0; i < count; i++) {
    const nameLength = zip.readUInt16LE(offset + 28);
    const extra = zip.readUInt16LE(offset + 30);
    const comment = zip.readUInt16LE(offset + 32);
    entries.push({
      name: zip.toString('utf8', offset + 46, offset + 46 + nameLength),
      size: zip.readUInt32LE(offset + 24),
    });
    offset += 46 + nameLength + extra + comment;
  }
  return entries;
}

/** Prints the size table. */
export function printSizes(sizes: readonly ArtifactSize[]): void {
  const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
  console.log('\nfunction artifacts (minified, AWS SDK from the nodejs24.x runtime):');
  console.log(`  ${'function'.padEnd(16)}${'zipped'.padStart(10)}${'bundle'.padStart(11)}  budget`);
  for (const s of sizes) {
    const within = s.unzippedBytes <= BUNDLE_BUDGET_BYTES ? 'ok' : 'OVER';
    console.log(
      `  ${s.function.padEnd(16)}${kb(s.zipBytes).padStart(10)}${kb(s.unzippedBytes).padStart(11)}  ${within} (${(s.unzippedBytes / BUNDLE_BUDGET_BYTES).toFixed(2)}× of ${kb(BUNDLE_BUDGET_BYTES)})`,
    );
  }
}

/** `npm run package`: packages with `args` and prints the size table; reads `env` once. */
async function main(args: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const stageArgs = args.includes('--stage') ? [] : ['--stage', 'dev'];
  // serverless-esbuild zips whatever an earlier build left in its folder (source maps, say).
  await rm(join(root, env.LAMBDACABLE_BUILD_DIR || '.esbuild'), {
    recursive: true,
    force: true,
  });
  const result = spawnSync(
    process.execPath,
    [join(root, 'node_modules/serverless/bin/serverless.js'), 'package', ...stageArgs, ...args],
    { cwd: root, stdio: 'inherit', env: { SLS_TELEMETRY_DISABLED: '1', ...env } },
  );
  if (result.status !== 0) process.exit(result.status ?? 1);
  const at = args.indexOf('--package');
  printSizes(await artifactSizes(join(root, at >= 0 ? args[at + 1]! : '.serverless')));
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  await main(process.argv.slice(2), process.env);
