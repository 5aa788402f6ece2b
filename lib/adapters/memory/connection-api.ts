import { LambdacableError } from '../../kernel/errors.js';
import type { ConnectionApi } from '../../realtime/ports.js';

/** A frame posted through {@link MemoryConnectionApi}. */
export interface PostedFrame {
  readonly connectionId: string;
  readonly frame: string;
  readonly endpoint: string | undefined;
}

/**
 * An in-memory {@link ConnectionApi} for tests and local runs: records the frames posted
 * to each connection and the closes; a connection marked gone (or closed) answers `'gone'`.
 */
export class MemoryConnectionApi implements ConnectionApi {
  /** Every delivered frame, in order. */
  readonly posted: PostedFrame[] = [];
  /** Every close, in order. */
  readonly closes: { readonly connectionId: string; readonly endpoint: string | undefined }[] = [];
  private readonly gone = new Set<string>();
  private readonly failures = new Map<string, unknown>();

  async post(connectionId: string, frame: string, endpoint?: string): Promise<'sent' | 'gone'> {
    const failure = this.failures.get(connectionId);
    if (failure !== undefined) throw failure;
    if (this.gone.has(connectionId)) return 'gone';
    this.posted.push({ connectionId, frame, endpoint });
    return 'sent';
  }

  async close(connectionId: string, endpoint?: string): Promise<void> {
    this.closes.push({ connectionId, endpoint });
    this.gone.add(connectionId);
  }

  /** The frames delivered to a connection, JSON-parsed, in order. */
  framesOf(connectionId: string): unknown[] {
    return this.posted
      .filter((p) => p.connectionId === connectionId)
      .map((p) => JSON.parse(p.frame) as unknown);
  }

  /** Whether a connection was closed. */
  isClosed(connectionId: string): boolean {
    return this.closes.some((c) => c.connectionId === connectionId);
  }

  /** From now on, posts to `connectionId` answer `'gone'`. */
  markGone(connectionId: string): void {
    this.gone.add(connectionId);
  }

  /** Posts to `connectionId` are delivered again (undoes {@link markGone}). */
  markReachable(connectionId: string): void {
    this.gone.delete(connectionId);
  }

  /** From now on, posts to `connectionId` throw `error`. */
  failPostsTo(connectionId: string, error: unknown = new LambdacableError('post failed')): void {
    this.failures.set(connectionId, error);
  }

  /** Posts to `connectionId` succeed again (undoes {@link failPostsTo}). */
  healPostsTo(connectionId: string): void {
    this.failures.delete(connectionId);
  }

  /** Forgets the recorded frames and closes (not the gone and failing marks). */
  clear(): void {
    this.posted.length = 0;
    this.closes.length = 0;
  }
}
