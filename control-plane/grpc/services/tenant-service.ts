import { CreateApiKeyRequestSchema, type ApiKeyView } from '../../../core/domain/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import type { KeyAdministration } from '../../auth/key-administration.ts';
import { pageOldestFirst } from '../../storage/paging.ts';
import { grpcNextPageToken, grpcPageRequest } from '../codec/paging.ts';
import { requiredId, toTimestamp } from '../codec/well-known.ts';
import type { GrpcServiceHandlers } from '../server.ts';

/** The key record of spec 2.8 as svc.tenant.v1.ApiKey: the masked hint, never the secret. */
export function toGrpcApiKey(view: ApiKeyView) {
  return {
    id: view.id,
    name: view.name,
    key_hint: view.key_hint,
    scopes: view.scopes,
    expires_at: toTimestamp(view.expires_at),
    created_at: toTimestamp(view.created_at),
    prefix: view.prefix,
    status: `API_KEY_STATUS_${view.status.toUpperCase()}`,
    last_used_at: toTimestamp(view.last_used_at),
  };
}

/** svc.tenant.v1.TenantService over the key management REST uses; every method needs admin. */
export function tenantService(keys: KeyAdministration): GrpcServiceHandlers {
  return {
    CreateApiKey: {
      access: 'admin',
      handle: async (request, { caller }) => {
        const scopes = request.scopes as string[];
        const parsed = parseOrThrow(
          CreateApiKeyRequestSchema,
          {
            name: request.name,
            ...(scopes.length === 0 ? {} : { scopes }),
            expires_in_seconds: Number(request.expires_in_seconds),
          },
          'request',
        );
        const { key_secret, ...view } = await keys.create(caller, parsed);
        return { api_key: toGrpcApiKey(view), key_secret };
      },
    },
    ListApiKeys: {
      access: 'admin',
      handle: async (request, { caller }) => {
        const page = pageOldestFirst('api-keys', await keys.list(caller.tenant), grpcPageRequest(request), (k) => k.id);
        return { api_keys: page.items.map(toGrpcApiKey), next_page_token: grpcNextPageToken(page) };
      },
    },
    RevokeApiKey: {
      access: 'admin',
      handle: async (request, { caller }) => {
        return { api_key: toGrpcApiKey(await keys.revoke(caller, requiredId(request, 'key_id'))) };
      },
    },
  };
}
