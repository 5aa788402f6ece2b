/** Whether preload.mjs can hook the installed serverless-offline (hook-check.mjs). */

/** The serverless-offline version preload.mjs was checked against. */
export const SUPPORTED_OFFLINE_VERSION: string;
/** The module whose `load` export preload.mjs replaces, relative to the package folder. */
export const USER_FUNCTION_FILE: string;
/** The module whose default export's `prototype.run` preload.mjs wraps. */
export const IN_PROCESS_RUNNER_FILE: string;
/** The module whose default export's `prototype.addClient` and `addRoute` frames-hook.mjs wraps. */
export const WEB_SOCKET_CLIENTS_FILE: string;
/** How every message of these checks starts. */
export const OFFLINE_HOOK_ERROR: string;

/** What keeps preload.mjs from hooking the serverless-offline in `packageDir`, or undefined. */
export function packageProblem(packageDir: string): string | undefined;

/** What keeps preload.mjs from wrapping `InProcessRunner.prototype.run`, or undefined. */
export function runnerProblem(packageDir: string, InProcessRunner: unknown): string | undefined;

/** What keeps preload.mjs from wrapping `WebSocketClients.prototype.addClient`, or undefined. */
export function webSocketClientsProblem(
  packageDir: string,
  WebSocketClients: unknown,
): string | undefined;
