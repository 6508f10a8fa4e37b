import { z } from 'zod';
import {
  ApiKeyViewSchema,
  CreateApiKeyRequestSchema,
  CreatedApiKeySchema,
  PathIdSchema,
} from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import type { KeyAdministration } from '../../auth/key-administration.ts';
import { pageOldestFirst } from '../../storage/paging.ts';
import { nextPageHeaders, NextPageHeaders, pageRequest, PagingQueryFields } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

/** The HTTP face of TenantService's key methods (spec 4.6): the secret is in the create answer only. */
export function apiKeyRoutes(routes: RouteTable, keys: KeyAdministration): void {
  routes.add({
    method: 'POST',
    path: '/v1/api-keys',
    operationId: 'createApiKey',
    tag: 'tenancy',
    access: 'admin',
    summary: 'Create an API key; key_secret is returned this once',
    body: CreateApiKeyRequestSchema,
    responses: {
      201: { description: 'created, with key_secret', schema: CreatedApiKeySchema },
      400: { description: 'invalid request (SVC-SYS-9002)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, body }) => ({ status: 201, body: await keys.create(caller, body) }),
  });
  routes.add({
    method: 'GET',
    path: '/v1/api-keys',
    operationId: 'listApiKeys',
    tag: 'tenancy',
    access: 'admin',
    summary: "The tenant's API keys (masked), oldest first, a page at a time (next page token in X-Next-Page-Token)",
    query: z.object(PagingQueryFields),
    responses: { 200: { description: 'a page of keys', schema: z.array(ApiKeyViewSchema), headers: NextPageHeaders } },
    handler: async ({ caller, query }) => {
      const page = pageOldestFirst('api-keys', await keys.list(caller.tenant), pageRequest(query), (k) => k.id);
      return { status: 200, body: page.items, headers: nextPageHeaders(page.nextPageToken) };
    },
  });
  routes.add({
    method: 'DELETE',
    path: '/v1/api-keys/{key_id}',
    operationId: 'revokeApiKey',
    tag: 'tenancy',
    access: 'admin',
    summary: 'Revoke an API key',
    params: z.object({ key_id: PathIdSchema }),
    responses: {
      200: { description: 'revoked', schema: ApiKeyViewSchema },
      404: { description: 'no such key (SVC-SYS-9006)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, params }) => ({ status: 200, body: await keys.revoke(caller, params.key_id) }),
  });
}
