import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

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
