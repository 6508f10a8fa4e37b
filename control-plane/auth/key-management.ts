import type { z } from 'zod';
import type { ApiKeyRecord, CreateApiKeyRequestSchema } from '../../core/domain/index.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { Storage } from '../storage/storage.ts';
import type { ApiKeys } from './api-keys.ts';

/**
 * The key operations of TenantService as every surface runs them: each write audited in its own
 * transaction, the secret returned by creation only.
 */
export class KeyManagement {
  private readonly deps: { keys: ApiKeys; storage: Storage; audit: AuditLog; clock: () => Date };

  constructor(deps: { keys: ApiKeys; storage: Storage; audit: AuditLog; clock: () => Date }) {
    this.deps = deps;
  }

  async create(
    caller: Caller,
    request: z.output<typeof CreateApiKeyRequestSchema>,
  ): Promise<{ record: ApiKeyRecord; secret: string; now: Date }> {
    const { keys, storage, audit } = this.deps;
    const now = this.deps.clock();
    const created = await storage.withTransaction(async (tx) => {
      const made = await keys.create(tx, caller.tenant, request, now);
      await audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'api_key.create',
        resource: { type: 'api_key', id: made.record.id },
        result: 'created',
        metadata: { name: request.name, scopes: request.scopes },
      });
      return made;
    });
    return { ...created, now };
  }

  list(caller: Caller): Promise<ApiKeyRecord[]> {
    return this.deps.keys.list(caller.tenant);
  }

  /** The revoked record; the key fails authentication from the next call on, on every surface. */
  async revoke(caller: Caller, keyId: string): Promise<{ record: ApiKeyRecord; now: Date }> {
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
    return { record, now };
  }
}
