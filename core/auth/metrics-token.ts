import { SvcError } from '../errors/index.ts';
import { bearerToken, hashKey, sameHash } from './bearer-secret.ts';

/**
 * Whether a scrape bears the metrics token (`Authorization: Bearer <token>`): false without
 * Authorization, SVC-SYS-9003 for anything else, so a mistyped token shows as an error. The
 * control plane then serves the series anyone may (none with tenant labels); the proxy, given a
 * token, serves nothing.
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
