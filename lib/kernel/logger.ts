/** The logging the library needs; Powertools' `Logger` and `console` both fit. */
export interface Logger {
  /** Detail for troubleshooting. */
  debug(message: string, ...attributes: Record<string, unknown>[]): void;
  /** A normal event. */
  info(message: string, ...attributes: Record<string, unknown>[]): void;
  /** A refused input or a recoverable problem. */
  warn(message: string, ...attributes: Record<string, unknown>[]): void;
  /** A failure that lost work. */
  error(message: string, ...attributes: Record<string, unknown>[]): void;
}

/** A logger that drops everything. */
export const noopLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
