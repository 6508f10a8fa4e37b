import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { SvcError } from '../../core/errors/index.ts';
import { ScopeSchema, SYSTEM_TENANT, TenantIdSchema, type Principal, type Scope } from '../../core/domain/index.ts';

export interface JwtOptions {
  jwksUrl: string;
  issuer: string;
  audience: string;
  tenantClaim: string;
  /** Longest `exp` − `iat` accepted. */
  maxLifetimeSeconds: number;
  tenantExists: (tenant: string) => Promise<boolean>;
  clock: () => Date;
}

/**
 * Asymmetric algorithms only: with a shared-secret one (HS*) anyone holding the secret could mint
 * tokens, and a JWKS publishes keys for verification, never secrets.
 */
const ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

/** Clock difference tolerated between the identity provider and this process. */
const CLOCK_SKEW_SECONDS = 60;

function scopesOf(payload: JWTPayload): Set<Scope> {
  const raw = payload.scope ?? payload.scp ?? payload.scopes;
  const list = typeof raw === 'string' ? raw.split(' ') : Array.isArray(raw) ? raw : [];
  return new Set(list.flatMap((s) => (ScopeSchema.safeParse(s).success ? [s as Scope] : [])));
}

function refused(reason: string): SvcError {
  return new SvcError('SVC-SYS-9003', `invalid JWT: ${reason}`);
}

/**
 * JWTs from an identity provider, checked against its JWKS (fetched and cached by jose, with
 * key rotation handled there). Claims used: the tenant claim (default `tenant_id`), `sub` as
 * the actor id, and scopes from `scope` (space separated), `scp` or `scopes`. A token must name
 * this service's issuer and audience and carry `iat` and `exp` within the configured lifetime,
 * so that none is accepted for ever, and its tenant must exist.
 */
export class JwtVerifier {
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>;

  private readonly options: JwtOptions;

  constructor(options: JwtOptions) {
    this.options = options;
    this.jwks = createRemoteJWKSet(new URL(options.jwksUrl));
  }

  /**
   * The token's principal, or null when its signature, issuer, audience or times do not hold
   * (the caller learns nothing about which). A token that does hold but whose claims this
   * service cannot act on is refused with the reason.
   */
  async verify(token: string): Promise<Principal | null> {
    const now = this.options.clock();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.jwks, {
        issuer: this.options.issuer,
        audience: this.options.audience,
        algorithms: ALGORITHMS,
        requiredClaims: ['exp', 'iat', 'sub'],
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: now,
      }));
    } catch {
      return null;
    }
    const { iat, exp, sub } = payload as Required<Pick<JWTPayload, 'iat' | 'exp' | 'sub'>>;
    if (iat > now.getTime() / 1000 + CLOCK_SKEW_SECONDS) throw refused('claim iat is in the future');
    if (exp - iat > this.options.maxLifetimeSeconds)
      throw refused(`its lifetime (exp - iat) exceeds ${this.options.maxLifetimeSeconds} s`);
    const tenant = payload[this.options.tenantClaim];
    if (typeof tenant !== 'string' || !TenantIdSchema.safeParse(tenant).success)
      throw refused(`claim ${this.options.tenantClaim} is not a tenant id`);
    if (typeof sub !== 'string' || sub.length === 0) throw refused('claim sub is not a string');
    if (!(await this.options.tenantExists(tenant)))
      throw refused(`claim ${this.options.tenantClaim} names no tenant of this service`);
    const scopes = scopesOf(payload);
    return {
      type: 'jwt',
      id: sub,
      tenant_id: tenant,
      scopes,
      administrator: tenant === SYSTEM_TENANT && scopes.has('admin'),
      expires_at: new Date(exp * 1000),
    };
  }
}

export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}
