import type { Logger } from '../../lib/core';
import { signStreamName } from '../../lib/core';

/** The extended protocol's subprotocol. */
export const EXT = 'actioncable-v1-ext-json';
export const JWT_SECRET = 'jwt-secret';
export const STREAMS_SECRET = 'streams-secret';

/** A public-stream identifier. */
export const pubsub = (stream: string) =>
  JSON.stringify({ channel: '$pubsub', stream_name: stream });

/** A signed-stream identifier. */
export const signedId = (stream: string, secret = STREAMS_SECRET) =>
  JSON.stringify({ channel: '$pubsub', signed_stream_name: signStreamName(stream, secret) });

/** One logged line. */
export interface LogEntry {
  readonly level: string;
  readonly message: string;
  readonly fields: Record<string, unknown> | undefined;
}

/** A logger that keeps every line, for assertions on what is logged at which level. */
export class RecordingLogger implements Logger {
  readonly entries: LogEntry[] = [];
  debug(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'debug', message, fields });
  }
  info(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'info', message, fields });
  }
  warn(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'warn', message, fields });
  }
  error(message: string, fields?: Record<string, unknown>) {
    this.entries.push({ level: 'error', message, fields });
  }
  at(level: string): LogEntry[] {
    return this.entries.filter((e) => e.level === level);
  }
  warnings(): string[] {
    return this.at('warn').map((e) => e.message);
  }
  /** Everything logged at INFO and above, as text. */
  visible(): string {
    return JSON.stringify(this.entries.filter((e) => e.level !== 'debug'));
  }
}
