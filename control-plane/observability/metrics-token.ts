import { SvcError } from '../../core/errors/index.ts';
import { bearerToken } from '../auth/authenticator.ts';
import { hashKey, sameHash } from '../auth/key-format.ts';

/**
 * Whether a scrape may read the per-tenant series of `/metrics`: it bears the metrics token
 * (`Authorization: Bearer <token>`). A scrape without Authorization reads the series anyone may;
 * one bearing anything else is refused, so a mistyped token shows as an error, not as series
 * gone missing.
 */
export function metricsAccess(token: () => string | undefined): (authorization: string | undefined) => boolean {
  return (authorization) => {
    if (authorization === undefined) return false;
    const expected = token();
    const presented = bearerToken(authorization);
    // Compared as digests, in constant time: the token's length is not told either.
    if (expected !== undefined && presented !== null && sameHash(hashKey(presented), hashKey(expected))) return true;
    throw new SvcError(
      'SVC-SYS-9003',
      'invalid metrics token: send Authorization: Bearer with the token of SVC_METRICS_TOKEN_FILE, or no Authorization for the series without tenant labels',
    );
  };
}
