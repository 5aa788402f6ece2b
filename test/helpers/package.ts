import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { inflateRawSync } from 'node:zlib';

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is untyped JSON.
type Json = any;

/** A CloudFormation template as JSON. */
export interface Template {
  Resources: Record<string, { Type: string; Properties: Record<string, Json>; [k: string]: Json }>;
  [k: string]: Json;
}

/** The output of `serverless package`: the folder, its files and the update template. */
export interface PackagedService {
  readonly dir: string;
  readonly artifacts: readonly string[];
  readonly template: Template;
  /** Removes the folder. */
  remove(): Promise<void>;
}

/**
 * Runs `serverless package` offline, without AWS credentials or LAMBDACABLE_ settings
 * (so the template is what a plain deploy gets), into a fresh folder.
 */
export async function packageService(
  stage = 'ci',
  extraEnv: Record<string, string> = {},
): Promise<PackagedService> {
  const dir = await mkdtemp(join(tmpdir(), 'lambdacable-package-'));
  // A fresh build folder: serverless-esbuild zips whatever an earlier build left in it.
  const buildDir = `.esbuild-package-${process.pid}-${Date.now()}`;
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('AWS_') || name.startsWith('LAMBDACABLE_')) delete env[name];
  }
  await promisify(execFile)(
    process.execPath,
    ['node_modules/serverless/bin/serverless.js', 'package', '--stage', stage, '--package', dir],
    {
      env: {
        ...env,
        SLS_TELEMETRY_DISABLED: '1',
        LAMBDACABLE_BUILD_DIR: buildDir,
        ...extraEnv,
      },
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const template = JSON.parse(
    await readFile(join(dir, 'cloudformation-template-update-stack.json'), 'utf8'),
  ) as Template;
  return {
    dir,
    artifacts: await readdir(dir),
    template,
    remove: async () => {
      await rm(dir, { recursive: true, force: true });
      await rm(buildDir, { recursive: true, force: true });
    },
  };
}

/** One file of a package folder, a zip's entries each as a file of its own (`a.zip!b.mjs`). */
export interface PackagedFile {
  readonly path: string;
  readonly content: string;
}

/** Every file under a package folder, recursively, with the zips' entries uncompressed. */
export async function packagedFiles(dir: string): Promise<PackagedFile[]> {
  const out: PackagedFile[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = join(entry.parentPath, entry.name);
    const path = relative(dir, full);
    const bytes = await readFile(full);
    out.push({ path, content: bytes.toString('latin1') });
    if (path.endsWith('.zip')) {
      for (const file of zipFiles(bytes))
        out.push({ path: `${path}!${file.name}`, content: file.data.toString('utf8') });
    }
  }
  return out;
}

/** The files of a zip (stored or deflated), read through its central directory. */
function zipFiles(zip: Buffer): { name: string; data: Buffer }[] {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) throw new Error('not a zip file: no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  let offset = zip.readUInt32LE(end + 16);
  const files: { name: string; data: Buffer }[] = [];
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(offset + 10);
    const compressed = zip.readUInt32LE(offset + 20);
    const nameLength = zip.readUInt16LE(offset + 28);
    const extra = zip.readUInt16LE(offset + 30);
    const comment = zip.readUInt16LE(offset + 32);
    const local = zip.readUInt32LE(offset + 42);
    const name = zip.toString('utf8', offset + 46, offset + 46 + nameLength);
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(start, start + compressed);
    if (!name.endsWith('/')) files.push({ name, data: method === 8 ? inflateRawSync(raw) : raw });
    offset += 46 + nameLength + extra + comment;
  }
  return files;
}
