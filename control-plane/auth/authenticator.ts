import { hash, timingSafeEqual } from 'node:crypto';
import { SvcError } from '../../core/errors/index.ts';
import { ALL_SCOPES, SYSTEM_TENANT, type Principal } from '../../core/domain/index.ts';
import type { ApiKeys } from './api-keys.ts';
import { looksLikeJwt, type JwtVerifier } from './jwt.ts';
import type { AuthFailureLimit } from './auth-failure-limit.ts';

export interface CredentialHeaders {
  'x-api-key'?: string | string[] | undefined;
  authorization?: string | undefined;
}

import { bearerToken } from '../../core/auth/bearer-secret.ts';

export { bearerToken };

/** One-shot, without a Hash object: every request's credential is compared with the bootstrap key's. */
function digest(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

/**
 * Turns the credential of a request into a principal: `X-Api-Key`, or `Authorization: Bearer`
 * carrying an API key or (when a JWKS is configured) a JWT. The bootstrap administrator key from
 * SVC_BOOTSTRAP_ADMIN_KEY is a root credential of the system tenant.
 */
export class Authenticator {
  private readonly bootstrapDigest: Buffer | null;

  private readonly keys: ApiKeys;
  private readonly jwt: JwtVerifier | null;
  private readonly clock: () => Date;
  private readonly failures: AuthFailureLimit;

  constructor(
    keys: ApiKeys,
    jwt: JwtVerifier | null,
    bootstrapAdminKey: string | undefined,
    clock: () => Date,
    failures: AuthFailureLimit,
  ) {
    this.keys = keys;
    this.jwt = jwt;
    this.clock = clock;
    this.failures = failures;
    this.bootstrapDigest = bootstrapAdminKey === undefined ? null : digest(bootstrapAdminKey);
  }

  /**
   * `client` is the address the request came from, as the surface knows it. A request without a
   * credential is not counted as a failure: it guesses nothing, and clients send one to learn
   * how to authenticate.
   */
  async authenticate(headers: CredentialHeaders, client: string): Promise<Principal> {
    const token = this.credentialOf(headers);
    if (token === null)
      throw new SvcError('SVC-SYS-9003', 'missing credentials: send X-Api-Key or Authorization: Bearer');
    this.failures.check(client);
    try {
      return await this.principalOf(token);
    } catch (error) {
      if (error instanceof SvcError && error.code === 'SVC-SYS-9003') this.failures.fail(client);
      throw error;
    }
  }

  private async principalOf(token: string): Promise<Principal> {
    if (this.bootstrapDigest !== null && timingSafeEqual(digest(token), this.bootstrapDigest)) {
      return {
        type: 'bootstrap',
        id: 'bootstrap-admin',
        tenant_id: SYSTEM_TENANT,
        scopes: new Set(ALL_SCOPES),
        administrator: true,
      };
    }
    const principal =
      this.jwt !== null && looksLikeJwt(token)
        ? await this.jwt.verify(token)
        : await this.keys.authenticate(token, this.clock());
    if (principal === null) throw new SvcError('SVC-SYS-9003', 'invalid, expired or revoked credentials');
    return principal;
  }

  private credentialOf(headers: CredentialHeaders): string | null {
    const apiKey = headers['x-api-key'];
    const key = Array.isArray(apiKey) ? apiKey[0] : apiKey;
    if (key !== undefined && key.length > 0) return key;
    return bearerToken(headers.authorization);
  }
}
