import { z } from 'zod';
import {
  ApiKeyViewSchema,
  CreateApiKeyRequestSchema,
  CreatedApiKeySchema,
  MAX_TEXT_LENGTH,
  NameSchema,
  ScopeSchema,
} from '../../../core/domain/index.ts';
import { pageOldestFirst } from '../../storage/paging.ts';
import { McpNextPageToken, mcpPageRequest, McpPagingInput, morePages } from '../paging.ts';
import type { McpServices } from '../services.ts';
import { defineTool, hints, type McpTool } from '../tool.ts';

export function apiKeyTools(s: McpServices): McpTool[] {
  return [
    defineTool({
      name: 'list_api_keys',
      title: 'List API keys',
      description:
        "The tenant's API keys, masked: id, name, prefix, scopes, status, last use; oldest first, a page at a time (20 unless page_size says otherwise, at most 100).",
      scope: 'admin',
      hints: hints.read,
      input: z.object(McpPagingInput),
      output: z.object({ api_keys: z.array(ApiKeyViewSchema), ...McpNextPageToken }),
      run: async (caller, input) => {
        const page = pageOldestFirst('api-keys', await s.keys.list(caller.tenant), mcpPageRequest(input), (k) => k.id);
        return {
          text: `${page.items.length} API keys${morePages(page.nextPageToken)}`,
          data: { api_keys: page.items, next_page_token: page.nextPageToken },
        };
      },
    }),
    defineTool({
      name: 'create_api_key',
      title: 'Create an API key',
      description: 'Creates a key; its full value (key_secret) is shown this once and never again.',
      scope: 'admin',
      hints: hints.create,
      input: z.object({
        name: NameSchema,
        description: z.string().max(MAX_TEXT_LENGTH).optional().describe('kept in the audit record of the creation'),
        scopes: z
          .array(ScopeSchema)
          .min(1)
          .max(20)
          .optional()
          .describe('default: envelopes:read, envelopes:write, budgets:read, policies:read, events:read'),
        expires_in_seconds: CreateApiKeyRequestSchema.shape.expires_in_seconds.describe(
          "0 (the default) never expires; a key created with a JWT or an expiring key must expire by the creating credential's expiry",
        ),
      }),
      output: z.object({ api_key: CreatedApiKeySchema }),
      run: async (caller, input) => {
        const created = await s.keys.create(
          caller,
          CreateApiKeyRequestSchema.parse({
            name: input.name,
            scopes: input.scopes,
            expires_in_seconds: input.expires_in_seconds,
          }),
          input.description,
        );
        return {
          text: `created API key ${created.name} (${created.id}); store key_secret now, it is not shown again`,
          data: { api_key: created },
        };
      },
    }),
    defineTool({
      name: 'revoke_api_key',
      title: 'Revoke an API key',
      description: 'Revokes a key; it is refused from the next call on, on every surface.',
      scope: 'admin',
      hints: hints.revoke,
      input: z.object({ key_id: z.string().min(1).max(100).describe('the id shown by list_api_keys') }),
      output: z.object({ api_key: ApiKeyViewSchema, message: z.string() }),
      run: async (caller, input) => {
        const key = await s.keys.revoke(caller, input.key_id);
        const message = `API key ${key.id} revoked`;
        return { text: message, data: { api_key: key, message } };
      },
    }),
  ];
}
