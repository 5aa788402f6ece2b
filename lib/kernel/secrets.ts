/**
 * The non-empty keys of a secret setting that may hold two during a rotation (the current
 * one first, then the previous one). An empty or unset key is never used: a setting with no
 * key accepts nothing.
 */
export function keysOf(keys: string | readonly (string | undefined)[]): string[] {
  return (typeof keys === 'string' ? [keys] : keys).filter((k): k is string => !!k);
}
