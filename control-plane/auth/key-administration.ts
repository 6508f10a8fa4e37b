import type { z } from 'zod';
import type { ApiKeyView, CreateApiKeyRequestSchema, Principal } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { Storage } from '../storage/storage.ts';
import { toKeyView, type ApiKeys } from './api-keys.ts';

type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequestSchema>;

/**
 * A key created with an expiring credential (a JWT, an API key with an expiry) must expire by
 * then: otherwise a user removed at the identity provider, a leaked short-lived token or a key
 * handed out for a week would leave a key that outlives them. Refused rather than shortened, so
 * the caller is never handed a key that lapses unannounced. The bootstrap key never expires.
 */
function boundByCredential(principal: Principal, seconds: number, now: Date): void {
  if (principal.expires_at === undefined) return;
  const allowed = Math.floor((principal.expires_at.getTime() - now.getTime()) / 1000);
  if (seconds > 0 && seconds <= allowed) return;
  const [credential, limit] =
    principal.type === 'jwt' ? ['a JWT', "the token's exp"] : ['an expiring API key', "the creating key's expires_at"];
  const description =
    allowed < 1
      ? `the credential expires now: a key created with ${credential} may not outlive ${limit}`
      : `must be 1 to ${allowed} for a key created with ${credential}: the key may not outlive ${limit}`;
  throw new SvcError('SVC-SYS-9002', `invalid request: expires_in_seconds: ${description}`, {}, [
    { field: 'expires_in_seconds', description },
  ]);
}

/**
 * What an administrator does with a tenant's keys, audited (TenantService of spec 4.6): every
 * surface creates, lists and revokes through here, so each write lands with its audit record.
 */
export class KeyAdministration {
  private readonly deps: { keys: ApiKeys; storage: Storage; audit: AuditLog; clock: () => Date };

  constructor(deps: { keys: ApiKeys; storage: Storage; audit: AuditLog; clock: () => Date }) {
    this.deps = deps;
  }

  /** The key's view and its secret, returned this once. `note` goes to the audit record only. */
  async create(
    caller: Caller,
    request: CreateApiKeyRequest,
    note?: string,
  ): Promise<ApiKeyView & { key_secret: string }> {
    const { keys, storage, audit } = this.deps;
    const now = this.deps.clock();
    boundByCredential(caller.principal, request.expires_in_seconds, now);
    const { record, secret } = await storage.withTransaction(async (tx) => {
      const created = await keys.create(tx, caller.tenant, request, now, caller.principal);
      await audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'api_key.create',
        resource: { type: 'api_key', id: created.record.id },
        result: 'created',
        metadata: { name: request.name, scopes: request.scopes, ...(note === undefined ? {} : { description: note }) },
      });
      return created;
    });
    return { ...toKeyView(record, now), key_secret: secret };
  }

  async list(tenant: string): Promise<ApiKeyView[]> {
    const now = this.deps.clock();
    return (await this.deps.keys.list(tenant)).map((r) => toKeyView(r, now));
  }

  /**
   * Revoked from the next call on, on every surface, with the keys it created (transitively);
   * SVC-SYS-9006 for an unknown key.
   */
  async revoke(caller: Caller, keyId: string): Promise<ApiKeyView> {
    const { keys, storage, audit } = this.deps;
    const now = this.deps.clock();
    const record = await storage.withTransaction(async (tx) => {
      const revoked = await keys.revoke(tx, caller.tenant, keyId, now);
      await audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'api_key.revoke',
        resource: { type: 'api_key', id: keyId },
        result: 'revoked',
      });
      return revoked;
    });
    return toKeyView(record, now);
  }
}
