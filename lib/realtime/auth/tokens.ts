import { createHmac, timingSafeEqual } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { type Clock, systemClock } from '../../kernel/clock.js';
import { errorMessage, UnauthorizedError } from '../../kernel/errors.js';
import { MAX_IDENTITY_BYTES, utf8Bytes } from '../../kernel/limits.js';
import { keysOf } from '../../kernel/secrets.js';

/**
 * Signs a stream name the way AnyCable (Rails `MessageVerifier`) does:
 * `base64(JSON.stringify(name)) + "--" + hex(HMAC-SHA256(secret, encoded))`.
 */
export function signStreamName(name: string, secret: string): string {
  const encoded = Buffer.from(JSON.stringify(name), 'utf8').toString('base64');
  return `${encoded}--${digest(encoded, secret)}`;
}

/** The stream name a signed name carries, or `undefined` when it is malformed or forged. */
export function verifySignedStreamName(
  signed: string,
  secret: string | readonly (string | undefined)[],
): string | undefined {
  const at = signed.lastIndexOf('--');
  if (at <= 0) return undefined;
  const encoded = signed.slice(0, at);
  const given = Buffer.from(signed.slice(at + 2), 'utf8');
  // The current secret or, during a rotation, the previous one.
  const verified = keysOf(secret).some((k) => {
    const expected = Buffer.from(digest(encoded, k), 'utf8');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!verified) return undefined;
  try {
    const name: unknown = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
    return typeof name === 'string' && name.length > 0 ? name : undefined;
  } catch {
    return undefined;
  }
}

function digest(encoded: string, secret: string): string {
  return createHmac('sha256', secret).update(encoded).digest('hex');
}

/** Claims of a connect token. */
export interface ConnectTokenClaims {
  /** The identity (JWT `sub`). */
  readonly sub: string;
  /** Seconds the token is valid for (JWT `exp` = now + ttl). */
  readonly ttlSeconds: number;
  /** AnyCable's identifiers claim (a JSON string); when present it is the identity. */
  readonly ext?: string;
}

/** An HS256 JWT for the `jid` query parameter. */
export async function createConnectToken(
  claims: ConnectTokenClaims,
  secret: string,
  clock: Clock = systemClock,
): Promise<string> {
  const now = Math.floor(clock.now() / 1000);
  const jwt = new SignJWT(claims.ext === undefined ? {} : { ext: claims.ext })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.sub)
    .setIssuedAt(now)
    .setExpirationTime(now + claims.ttlSeconds);
  return jwt.sign(key(secret));
}

/** Checks of {@link verifyConnectToken} beyond the signature. */
export interface VerifyTokenOptions {
  /**
   * Seconds a token's `exp` (and `nbf`) may be off the clock.
   * @default 30
   */
  readonly clockSkewSeconds?: number;
  /** Required `iss`; unset: not checked. @default undefined */
  readonly issuer?: string;
  /** Required `aud` (one of the token's audiences); unset: not checked. @default undefined */
  readonly audience?: string;
  /**
   * Seconds after its `iat` a token is refused (an `iat` is then required); unset: only
   * `exp` bounds a token's life. @default undefined
   */
  readonly maxAgeSeconds?: number;
}

/**
 * Verifies a connect token: HS256, an `exp` claim is required and checked against
 * `clock` with `clockSkewSeconds` of tolerance, `iss` and `aud` when configured. The
 * identity is the `ext` claim when present (AnyCable JWT identification), else `sub`; it
 * is at most {@link MAX_IDENTITY_BYTES}. Throws {@link UnauthorizedError} for a malformed,
 * forged or expired token, one without `exp`, or one without (or with a too long) identity.
 */
export async function verifyConnectToken(
  token: string,
  secret: string | readonly (string | undefined)[],
  clock: Clock = systemClock,
  options: VerifyTokenOptions = {},
): Promise<{ identity: string }> {
  if (!token) throw new UnauthorizedError('no token: expected a JWT in jid', { reason: 'missing' });
  const secrets = keysOf(secret);
  if (secrets.length === 0) {
    throw new UnauthorizedError('no JWT secret configured: cannot verify tokens', {
      reason: 'signature',
    });
  }
  let payload: Record<string, unknown> | undefined;
  // The current secret, then (during a rotation) the previous one: a signature that fails
  // under one may verify under the next; any other refusal is final.
  for (const [i, s] of secrets.entries()) {
    try {
      ({ payload } = await jwtVerify(token, key(s), {
        algorithms: ['HS256'],
        currentDate: new Date(clock.now()),
        requiredClaims: options.maxAgeSeconds === undefined ? ['exp'] : ['exp', 'iat'],
        clockTolerance: options.clockSkewSeconds ?? 30,
        ...(options.maxAgeSeconds !== undefined ? { maxTokenAge: options.maxAgeSeconds } : {}),
        ...(options.issuer !== undefined ? { issuer: options.issuer } : {}),
        ...(options.audience !== undefined ? { audience: options.audience } : {}),
      }));
      break;
    } catch (error) {
      const last = i === secrets.length - 1;
      if (!last && error instanceof joseErrors.JWSSignatureVerificationFailed) continue;
      throw new UnauthorizedError(`token refused: ${errorMessage(error)}`, {
        reason: reasonOf(error),
        cause: error,
      });
    }
  }
  if (!payload) throw new UnauthorizedError('token refused', { reason: 'signature' });
  const { ext, sub } = payload;
  const identity =
    typeof ext === 'string' ? ext : ext !== undefined && ext !== null ? JSON.stringify(ext) : sub;
  if (typeof identity !== 'string' || identity.length === 0) {
    throw new UnauthorizedError('token has no identity: expected a sub or ext claim', {
      reason: 'claims',
    });
  }
  const bytes = utf8Bytes(identity);
  if (bytes > MAX_IDENTITY_BYTES) {
    throw new UnauthorizedError(
      `token identity is ${bytes} bytes, the limit is ${MAX_IDENTITY_BYTES} (UTF-8)`,
      { reason: 'claims' },
    );
  }
  return { identity };
}

function key(secret: string): Uint8Array {
  return new TextEncoder().encode(secret);
}

function reasonOf(error: unknown): UnauthorizedError['reason'] {
  if (error instanceof joseErrors.JWTExpired) return 'expired';
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'signature';
  if (error instanceof joseErrors.JWTClaimValidationFailed) return 'claims';
  return 'malformed';
}
