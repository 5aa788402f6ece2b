/**
 * What a revocation names: a stream, an identity, one session (by sid), one identity's
 * subscriptions to one stream (`identity-stream`, named by `identityStreamTarget`'s encoding
 * of the pair), or one session's subscription to one stream (`session-stream`, named by
 * `sessionStreamTarget`'s).
 */
export interface RevocationTarget {
  readonly kind: 'stream' | 'identity' | 'session' | 'identity-stream' | 'session-stream';
  readonly name: string;
}

/** The latest revocation of targets, by {@link revocationKey}. */
export type RevocationTimes = ReadonlyMap<string, number>;

/** Where revocations are kept, as long as a session written before them may be restored. */
export interface RevocationStore {
  /** Records that `target` was revoked at `atMs` (ms since the epoch); a later one stays. */
  revoke(target: RevocationTarget, atMs: number): Promise<void>;
  /** When each of `targets` was last revoked (ms), by {@link revocationKey}; absent: never. */
  revokedAt(targets: readonly RevocationTarget[]): Promise<RevocationTimes>;
}
