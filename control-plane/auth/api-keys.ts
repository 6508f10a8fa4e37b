import type { z } from 'zod';
import { SvcError } from '../../core/errors/index.ts';
import {
  SYSTEM_TENANT,
  type ApiKeyRecord,
  type ApiKeyView,
  type CreateApiKeyRequestSchema,
  type Principal,
} from '../../core/domain/index.ts';
import { collectPages } from '../storage/paging.ts';
import type { Repositories, Storage } from '../storage/storage.ts';
import { generateApiKey, hashKey, keyHint, parseKeyId, sameHash } from './key-format.ts';

type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequestSchema>;

export function keyStatus(record: ApiKeyRecord, now: Date): ApiKeyView['status'] {
  if (record.revoked_at !== null) return 'revoked';
  if (record.expires_at !== null && now.getTime() >= Date.parse(record.expires_at)) return 'expired';
  return 'active';
}

export function toKeyView(record: ApiKeyRecord, now: Date): ApiKeyView {
  return {
    id: record.id,
    name: record.name,
    key_hint: record.key_hint,
    prefix: record.key_hint.slice(0, 8),
    scopes: record.scopes,
    status: keyStatus(record, now),
    expires_at: record.expires_at,
    created_at: record.created_at,
    last_used_at: record.last_used_at,
  };
}

/** API keys of TenantService: create (secret shown once), list, revoke, and authentication. */
export class ApiKeys {
  private readonly storage: Storage;

  constructor(storage: Storage) {
    this.storage = storage;
  }

  /**
   * Stores the key in the caller's transaction and returns the record with the one-time secret.
   * `creator` is the principal asking: a key made by an API key is revoked with it.
   */
  async create(
    tx: Repositories,
    tenant: string,
    request: CreateApiKeyRequest,
    now: Date,
    creator?: Principal,
  ): Promise<{ record: ApiKeyRecord; secret: string }> {
    const { id, secret } = generateApiKey();
    const record: ApiKeyRecord = {
      id,
      tenant_id: tenant,
      name: request.name,
      key_hint: keyHint(secret),
      key_hash: hashKey(secret),
      scopes: request.scopes,
      expires_at:
        request.expires_in_seconds > 0
          ? new Date(now.getTime() + request.expires_in_seconds * 1000).toISOString()
          : null,
      created_at: now.toISOString(),
      revoked_at: null,
      last_used_at: null,
      ...(creator?.type === 'api_key' ? { created_by: creator.id } : {}),
    };
    // A key revoked since it authenticated creates nothing (it might be a leaked key's descendant).
    if (record.created_by !== undefined && !(await tx.apiKeys.holdUnrevoked(record.created_by)))
      throw new SvcError('SVC-SYS-9003', 'invalid, expired or revoked credentials');
    await tx.apiKeys.insert(tenant, record);
    return { record, secret };
  }

  list(tenant: string): Promise<ApiKeyRecord[]> {
    return collectPages((page) => this.storage.read.apiKeys.list(tenant, page));
  }

  /**
   * Revokes in the caller's transaction, with every key it created and theirs: a key handed out by
   * a leaked key goes with it. A key revoked before stays as it was.
   */
  async revoke(tx: Repositories, tenant: string, id: string, now: Date): Promise<ApiKeyRecord> {
    const record = await tx.apiKeys.revoke(tenant, id, now.toISOString());
    if (record === undefined) throw new SvcError('SVC-SYS-9006', `API key ${id} not found`, { key_id: id });
    return record;
  }

  /** The principal of a presented key, or null when it is unknown, revoked or expired. */
  async authenticate(secret: string, now: Date): Promise<Principal | null> {
    const id = parseKeyId(secret);
    if (id === null) return null;
    const tenant = await this.storage.read.apiKeys.tenantOf(id);
    if (tenant === undefined) return null;
    const record = await this.storage.read.apiKeys.get(tenant, id);
    if (record === undefined || !sameHash(record.key_hash, hashKey(secret)) || keyStatus(record, now) !== 'active')
      return null;
    return {
      type: 'api_key',
      id: record.id,
      tenant_id: tenant,
      scopes: new Set(record.scopes),
      administrator: tenant === SYSTEM_TENANT && record.scopes.includes('admin'),
      ...(record.expires_at === null ? {} : { expires_at: new Date(record.expires_at) }),
    };
  }
}
