import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { ScopeSchema, SYSTEM_TENANT, type Principal, type Scope } from '../../core/domain/index.ts';

export interface JwtOptions {
  jwksUrl: string;
  issuer?: string;
  audience?: string;
  tenantClaim: string;
}

function scopesOf(payload: JWTPayload): Set<Scope> {
  const raw = payload.scope ?? payload.scp ?? payload.scopes;
  const list = typeof raw === 'string' ? raw.split(' ') : Array.isArray(raw) ? raw : [];
  return new Set(list.flatMap((s) => (ScopeSchema.safeParse(s).success ? [s as Scope] : [])));
}

/**
 * JWTs from an identity provider, checked against its JWKS (fetched and cached by jose, with
 * key rotation handled there). Claims used: the tenant claim (default `tenant_id`), `sub` as
 * the actor id, and scopes from `scope` (space separated), `scp` or `scopes`.
 */
export class JwtVerifier {
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>;

  private readonly options: JwtOptions;

  constructor(options: JwtOptions) {
    this.options = options;
    this.jwks = createRemoteJWKSet(new URL(options.jwksUrl));
  }

  async verify(token: string): Promise<Principal | null> {
    try {
      const { payload } = await jwtVerify(token, this.jwks, {
        ...(this.options.issuer !== undefined ? { issuer: this.options.issuer } : {}),
        ...(this.options.audience !== undefined ? { audience: this.options.audience } : {}),
      });
      const tenant = payload[this.options.tenantClaim];
      if (typeof tenant !== 'string' || tenant.length === 0 || typeof payload.sub !== 'string') return null;
      const scopes = scopesOf(payload);
      return {
        type: 'jwt',
        id: payload.sub,
        tenant_id: tenant,
        scopes,
        administrator: tenant === SYSTEM_TENANT && scopes.has('admin'),
      };
    } catch {
      return null;
    }
  }
}

export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}
