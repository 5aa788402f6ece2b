/**
 * Whether preload.mjs can hook the serverless-offline that is installed. The hook reaches
 * private files of the package (no export of it names them), so it holds only for the version
 * it was checked against: another one may move them, or run functions differently, and the
 * functions meant for worker threads would then run in process without a word (or the frames
 * meant for the SQS integration would reach no queue).
 *
 * Pure checks on a package folder (and on the runner class once imported): they return what is
 * wrong, or undefined; preload.mjs exits with it, and infra/local/offline/launch.ts throws it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/**
 * The serverless-offline version preload.mjs was checked against (package.json pins it). To
 * move to another: read the files below in it, check that `InProcessRunner.run` still
 * copies the function's environment onto `process.env` and then calls UserFunction's `load`
 * (its named import), that `WebSocketClients.addClient` still registers the socket's "message"
 * listener with `on` (and `addRoute` still adds the routes), and set this.
 */
export const SUPPORTED_OFFLINE_VERSION = '14.8.5';

const RUNNER = 'src/lambda/handler-runner/in-process-runner';
/** The module whose `load` export preload.mjs replaces, relative to the package folder. */
export const USER_FUNCTION_FILE = `${RUNNER}/aws-lambda-ric/UserFunction.js`;
/** The module whose default export's `prototype.run` preload.mjs wraps. */
export const IN_PROCESS_RUNNER_FILE = `${RUNNER}/InProcessRunner.js`;

/**
 * The module whose default export's `prototype.addClient` and `addRoute` preload.mjs wraps when
 * the `$default` route is the frames queue (frames-hook.mjs).
 */
export const WEB_SOCKET_CLIENTS_FILE = 'src/events/websocket/WebSocketClients.js';

/** How every message of these checks starts: stack.ts finds it in serverless-offline's output. */
export const OFFLINE_HOOK_ERROR = 'lambdacable offline: cannot hook serverless-offline';

/**
 * What keeps preload.mjs from hooking the serverless-offline in `packageDir`: a version other
 * than {@link SUPPORTED_OFFLINE_VERSION}, a missing file, a `load` that is no function. Loads
 * UserFunction.js (CommonJS, no side effects); InProcessRunner.js is only looked for, since
 * it must be imported after `load` is replaced ({@link runnerProblem} checks it then).
 */
export function packageProblem(packageDir) {
  const found = installedVersion(packageDir);
  const problems = [];
  if (found !== SUPPORTED_OFFLINE_VERSION) {
    problems.push(
      found === undefined
        ? `no ${join(packageDir, 'package.json')} with a version`
        : `version ${found} is not the supported ${SUPPORTED_OFFLINE_VERSION}`,
    );
  }
  const userFunction = join(packageDir, USER_FUNCTION_FILE);
  if (!existsSync(userFunction)) {
    problems.push(`${USER_FUNCTION_FILE} is missing`);
  } else {
    try {
      const { load } = createRequire(userFunction)(userFunction);
      if (typeof load !== 'function') {
        problems.push(`${USER_FUNCTION_FILE} exports no function load (found ${typeof load})`);
      }
    } catch (error) {
      problems.push(`${USER_FUNCTION_FILE} does not load: ${messageOf(error)}`);
    }
  }
  for (const file of [IN_PROCESS_RUNNER_FILE, WEB_SOCKET_CLIENTS_FILE]) {
    if (!existsSync(join(packageDir, file))) problems.push(`${file} is missing`);
  }
  return problems.length ? failure(packageDir, found, problems) : undefined;
}

/**
 * What keeps preload.mjs from wrapping `InProcessRunner.prototype.run`, the default export of
 * {@link IN_PROCESS_RUNNER_FILE}: no such method, or one that no longer sets `process.env`
 * (the hook learns which function an invocation is for from the environment `run` copies).
 */
export function runnerProblem(packageDir, InProcessRunner) {
  const run = InProcessRunner?.prototype?.run;
  let problem;
  if (typeof run !== 'function') {
    problem = `${IN_PROCESS_RUNNER_FILE}: its default export has no method run (found ${typeof run})`;
  } else if (!String(run).includes('process.env')) {
    problem = `${IN_PROCESS_RUNNER_FILE}: InProcessRunner.prototype.run no longer sets process.env`;
  }
  return problem ? failure(packageDir, installedVersion(packageDir), [problem]) : undefined;
}

/**
 * What keeps preload.mjs from handing the frames to the `$default` route's SQS integration
 * (frames-hook.mjs), given the default export of {@link WEB_SOCKET_CLIENTS_FILE}: no method
 * addClient, or one that no longer registers the connection's "message" listener with `on`
 * (the hook replaces that listener while addClient runs), or no method addRoute.
 */
export function webSocketClientsProblem(packageDir, WebSocketClients) {
  const { addClient, addRoute } = WebSocketClients?.prototype ?? {};
  let problem;
  if (typeof addClient !== 'function') {
    problem = `its default export has no method addClient (found ${typeof addClient})`;
  } else if (!/\.on\(\s*["']message["']/.test(String(addClient))) {
    problem = 'WebSocketClients.prototype.addClient no longer registers on("message", ...)';
  } else if (typeof addRoute !== 'function') {
    problem = `its default export has no method addRoute (found ${typeof addRoute})`;
  }
  return problem
    ? failure(packageDir, installedVersion(packageDir), [`${WEB_SOCKET_CLIENTS_FILE}: ${problem}`])
    : undefined;
}

function failure(packageDir, found, problems) {
  return (
    `${OFFLINE_HOOK_ERROR} (found ${found ?? 'no version'} in ${packageDir}, expected ` +
    `${SUPPORTED_OFFLINE_VERSION}): ${problems.join('; ')}. infra/local/offline/preload.mjs ` +
    `runs the functions through this private hook: install serverless-offline@` +
    `${SUPPORTED_OFFLINE_VERSION} (npm ci), or check the hook against the new version and set ` +
    'SUPPORTED_OFFLINE_VERSION in infra/local/offline/hook-check.mjs'
  );
}

function installedVersion(packageDir) {
  try {
    const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
    return typeof version === 'string' ? version : undefined;
  } catch {
    return undefined;
  }
}

function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}
