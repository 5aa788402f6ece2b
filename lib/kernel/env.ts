import { ConfigError } from './errors.js';

/**
 * Readers of settings from an environment, shared by every room's settings. Pure: the
 * composition root hands in the process environment. An unset or empty variable takes its
 * fallback; an invalid value throws {@link ConfigError} naming the variable and what was
 * expected.
 */

/** An environment: variable names to values. */
export type Env = Readonly<Record<string, string | undefined>>;

/** The variable's value; unset and empty are both `undefined`. */
export function envText(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** `true`/`1` or `false`/`0`, any case. */
export function envFlag(env: Env, name: string, fallback: boolean): boolean {
  const value = envText(env, name)?.trim().toLowerCase();
  if (value === undefined) return fallback;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new ConfigError(`${name} must be true or false, got: ${env[name]}`, { variable: name });
}

/** One of `values`, any case. */
export function envOneOf<T extends string>(
  env: Env,
  name: string,
  values: readonly T[],
  fallback: T,
): T {
  const value = envText(env, name)?.trim().toLowerCase();
  if (value === undefined) return fallback;
  if ((values as readonly string[]).includes(value)) return value as T;
  throw new ConfigError(`${name} must be one of ${values.join(', ')}, got: ${env[name]}`, {
    variable: name,
  });
}

/** A number above zero, and at most `max`; a whole one when `integer`. */
export function envPositive(
  env: Env,
  name: string,
  fallback: number,
  integer: boolean,
  max = Number.POSITIVE_INFINITY,
): number {
  const value = envText(env, name)?.trim();
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > max || (integer && !Number.isInteger(n))) {
    throw new ConfigError(
      `${name} must be a positive ${integer ? 'integer' : 'number'}${max < n ? ` up to ${max}` : ''}, got: ${env[name]}`,
      { variable: name },
    );
  }
  return n;
}

/** A whole number, zero included. */
export function envCount(env: Env, name: string, fallback: number): number {
  return envAtLeastZero(env, name, fallback, 'an integer', Number.isInteger);
}

/** A number that `valid` accepts and is at least zero; `what` names it in the error. */
export function envAtLeastZero(
  env: Env,
  name: string,
  fallback: number,
  what: string,
  valid: (n: number) => boolean,
): number {
  const value = envText(env, name)?.trim();
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!valid(n) || n < 0) {
    throw new ConfigError(`${name} must be ${what} >= 0, got: ${env[name]}`, { variable: name });
  }
  return n;
}
