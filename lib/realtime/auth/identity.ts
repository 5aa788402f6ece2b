import type { Clock } from '../../kernel/clock.js';
import { UnauthorizedError } from '../../kernel/errors.js';
import type { AuthConfig } from './settings.js';
import { verifyConnectToken } from './tokens.js';

/** The settings identification reads. */
export type IdentityConfig = Pick<
  AuthConfig,
  | 'allowAnonymous'
  | 'jwtSecret'
  | 'jwtPreviousSecret'
  | 'jwtMaxAge'
  | 'jwtClockSkew'
  | 'jwtIssuer'
  | 'jwtAudience'
>;

/** Who a client is (`''` when anonymous), or why its credentials are refused. */
export type Identification =
  | { readonly ok: true; readonly identity: string }
  | { readonly ok: false; readonly refusal: UnauthorizedError };

/**
 * Identifies a client by its JWT (`jid`, see {@link verifyConnectToken}); without a token
 * it is anonymous when `allowAnonymous`, else refused as `missing`. Errors other than a
 * refused token (none are expected) are thrown.
 */
export async function identify(
  token: string | undefined,
  config: IdentityConfig,
  clock: Clock,
): Promise<Identification> {
  try {
    return { ok: true, identity: await identityOf(token, config, clock) };
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    return { ok: false, refusal: error };
  }
}

async function identityOf(
  token: string | undefined,
  config: IdentityConfig,
  clock: Clock,
): Promise<string> {
  if (!token) {
    if (config.allowAnonymous) return '';
    throw new UnauthorizedError('no token: expected a JWT in jid', { reason: 'missing' });
  }
  const secrets = [config.jwtSecret, config.jwtPreviousSecret];
  const { identity } = await verifyConnectToken(token, secrets, clock, {
    clockSkewSeconds: config.jwtClockSkew,
    ...(config.jwtMaxAge !== undefined ? { maxAgeSeconds: config.jwtMaxAge } : {}),
    ...(config.jwtIssuer !== undefined ? { issuer: config.jwtIssuer } : {}),
    ...(config.jwtAudience !== undefined ? { audience: config.jwtAudience } : {}),
  });
  return identity;
}
