import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  IN_PROCESS_RUNNER_FILE,
  OFFLINE_HOOK_ERROR,
  packageProblem,
  runnerProblem,
  SUPPORTED_OFFLINE_VERSION,
  USER_FUNCTION_FILE,
  WEB_SOCKET_CLIENTS_FILE,
  webSocketClientsProblem,
} from '../../../infra/local/offline/hook-check.mjs';
import { LocalStackError, offlineExitError } from '../../../infra/local/stack';
import { LambdacableError } from '../../../lib/core';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const installed = join(root, 'node_modules', 'serverless-offline');

const USER_FUNCTION = 'module.exports.load = async function () {};\n';
const IN_PROCESS_RUNNER =
  'export default class InProcessRunner {\n' +
  '  async run() { Object.assign(process.env, {}); }\n' +
  '}\n';
const WEB_SOCKET_CLIENTS =
  'export default class WebSocketClients {\n' +
  '  addClient(client) { client.on("message", () => {}); }\n' +
  '  addRoute() {}\n' +
  '}\n';

const temporary: string[] = [];
afterEach(() => {
  for (const dir of temporary.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A serverless-offline package folder; a file given as null is left out. */
function fakeOffline(
  files: {
    version?: string;
    userFunction?: string | null;
    inProcessRunner?: string | null;
    webSocketClients?: string | null;
  } = {},
  under: string = mkdtempSync(join(tmpdir(), 'lambdacable-offline-hook-')),
): string {
  temporary.push(under);
  const dir = join(under, 'node_modules', 'serverless-offline');
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  };
  write(
    'package.json',
    JSON.stringify({ name: 'serverless-offline', version: files.version ?? '14.8.5' }),
  );
  const userFunction = files.userFunction === undefined ? USER_FUNCTION : files.userFunction;
  if (userFunction !== null) write(USER_FUNCTION_FILE, userFunction);
  const runner = files.inProcessRunner === undefined ? IN_PROCESS_RUNNER : files.inProcessRunner;
  if (runner !== null) write(IN_PROCESS_RUNNER_FILE, runner);
  const clients =
    files.webSocketClients === undefined ? WEB_SOCKET_CLIENTS : files.webSocketClients;
  if (clients !== null) write(WEB_SOCKET_CLIENTS_FILE, clients);
  return dir;
}

const advice =
  'infra/local/offline/preload.mjs runs the functions through this private hook: install ' +
  'serverless-offline@14.8.5 (npm ci), or check the hook against the new version and set ' +
  'SUPPORTED_OFFLINE_VERSION in infra/local/offline/hook-check.mjs';

describe('npm start: the serverless-offline hook (infra/local/offline/hook-check.mjs)', () => {
  it('supports the serverless-offline package.json pins, and finds its hook points', async () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(pkg.devDependencies['serverless-offline']).toBe(SUPPORTED_OFFLINE_VERSION);
    expect(packageProblem(installed)).toBeUndefined();
    const runner = await import(pathToFileURL(join(installed, IN_PROCESS_RUNNER_FILE)).href);
    expect(runnerProblem(installed, runner.default)).toBeUndefined();
    const clients = await import(pathToFileURL(join(installed, WEB_SOCKET_CLIENTS_FILE)).href);
    expect(webSocketClientsProblem(installed, clients.default)).toBeUndefined();
  });

  it('refuses another version, naming the version found and the one expected', () => {
    const dir = fakeOffline({ version: '14.9.0' });
    expect(packageProblem(dir)).toBe(
      `${OFFLINE_HOOK_ERROR} (found 14.9.0 in ${dir}, expected 14.8.5): version 14.9.0 is ` +
        `not the supported 14.8.5. ${advice}`,
    );
  });

  it('refuses a package without a file it patches, naming the file', () => {
    const dir = fakeOffline({ userFunction: null });
    expect(packageProblem(dir)).toBe(
      `${OFFLINE_HOOK_ERROR} (found 14.8.5 in ${dir}, expected 14.8.5): ` +
        `src/lambda/handler-runner/in-process-runner/aws-lambda-ric/UserFunction.js is ` +
        `missing. ${advice}`,
    );
    const all = fakeOffline({
      version: '15.0.0',
      userFunction: null,
      inProcessRunner: null,
      webSocketClients: null,
    });
    expect(packageProblem(all)).toContain(
      'version 15.0.0 is not the supported 14.8.5; ' +
        `${USER_FUNCTION_FILE} is missing; ${IN_PROCESS_RUNNER_FILE} is missing; ` +
        `${WEB_SOCKET_CLIENTS_FILE} is missing.`,
    );
  });

  it('refuses a UserFunction.js without the load function it replaces', () => {
    const dir = fakeOffline({ userFunction: 'module.exports.loadHandler = () => {};\n' });
    expect(packageProblem(dir)).toContain(
      `: ${USER_FUNCTION_FILE} exports no function load (found undefined). `,
    );
  });

  it('refuses a runner without the run method it wraps, or whose run sets no process.env', () => {
    const dir = fakeOffline();
    expect(runnerProblem(dir, class {})).toContain(
      `(found 14.8.5 in ${dir}, expected 14.8.5): ${IN_PROCESS_RUNNER_FILE}: its default ` +
        'export has no method run (found undefined).',
    );
    expect(runnerProblem(dir, undefined)).toContain('has no method run (found undefined)');
    class Elsewhere {
      run(env: Record<string, string>) {
        return env;
      }
    }
    expect(runnerProblem(dir, Elsewhere)).toContain(
      `${IN_PROCESS_RUNNER_FILE}: InProcessRunner.prototype.run no longer sets process.env.`,
    );
  });

  it('refuses WebSocketClients without the addClient whose "message" listener the frames hook replaces', async () => {
    const dir = fakeOffline();
    const fake = await import(pathToFileURL(join(dir, WEB_SOCKET_CLIENTS_FILE)).href);
    expect(webSocketClientsProblem(dir, fake.default)).toBeUndefined();
    expect(webSocketClientsProblem(dir, class {})).toContain(
      `(found 14.8.5 in ${dir}, expected 14.8.5): ${WEB_SOCKET_CLIENTS_FILE}: its default ` +
        'export has no method addClient (found undefined).',
    );
    class Elsewhere {
      addClient(client: { addListener(e: string, f: () => void): void }) {
        client.addListener('message', () => {});
      }
      addRoute() {}
    }
    expect(webSocketClientsProblem(dir, Elsewhere)).toContain(
      `${WEB_SOCKET_CLIENTS_FILE}: WebSocketClients.prototype.addClient no longer registers ` +
        'on("message", ...).',
    );
    class NoRoutes {
      addClient(client: { on(e: string, f: () => void): void }) {
        client.on('message', () => {});
      }
    }
    expect(webSocketClientsProblem(dir, NoRoutes)).toContain(
      'its default export has no method addRoute (found undefined).',
    );
  });

  it("ends serverless-offline's process with the reason on stderr before serverless runs", () => {
    // preload.mjs finds serverless-offline at ../../../node_modules from itself: a copy of it
    // beside a fake package.
    const tree = mkdtempSync(join(tmpdir(), 'lambdacable-offline-preload-'));
    const dir = fakeOffline({ version: '14.9.0', userFunction: null }, tree);
    const offline = join(tree, 'infra', 'local', 'offline');
    mkdirSync(offline, { recursive: true });
    const files = ['preload.mjs', 'hook-check.mjs', 'workers.mjs', 'worker.mjs'];
    for (const file of [...files, 'frames-hook.mjs', 'frames-integration.mjs']) {
      copyFileSync(join(root, 'infra', 'local', 'offline', file), join(offline, file));
    }
    const ran = spawnSync(
      process.execPath,
      ['--import', pathToFileURL(join(offline, 'preload.mjs')).href, '-e', 'console.log("ran")'],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(ran.status).toBe(1);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toBe(
      `${OFFLINE_HOOK_ERROR} (found 14.9.0 in ${dir}, expected 14.8.5): version 14.9.0 is ` +
        `not the supported 14.8.5; ${USER_FUNCTION_FILE} is missing. ${advice}\n`,
    );
  });

  it('makes startLocalStack throw that reason as a LocalStackError, without the rest', () => {
    const reason = packageProblem(fakeOffline({ version: '14.9.0' }))!;
    const error = offlineExitError(1, `Debugger noise\n${reason}\nNode.js v20.0.0\n`);
    expect(error).toBeInstanceOf(LocalStackError);
    expect(error).toBeInstanceOf(LambdacableError);
    expect(error.name).toBe('LocalStackError');
    expect(error.message).toBe(`serverless offline did not start: ${reason}`);
    expect(error).toMatchObject({ service: 'serverless-offline', exitStatus: 1 });
  });

  it('keeps the whole output of a serverless-offline that exited for another reason', () => {
    const error = offlineExitError('SIGKILL', 'Serverless: starting\nKilled\n');
    expect(error.message).toBe(
      'serverless offline exited (SIGKILL):\nServerless: starting\nKilled\n',
    );
    expect(error.exitStatus).toBe('SIGKILL');
  });
});
