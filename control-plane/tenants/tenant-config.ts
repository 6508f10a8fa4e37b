import { z } from 'zod';
import type { Caller } from '../caller.ts';
import type { Readers } from '../storage/storage.ts';

export const TenantConfigSchema = z.object({
  tenant_id: z.string(),
  name: z.string(),
  created_at: z.string().nullable(),
  credential: z.object({ type: z.string(), id: z.string(), scopes: z.array(z.string()) }),
  /** The service's settings a tenant may see: nothing secret. */
  service: z.record(z.string(), z.unknown()),
});
export type TenantConfig = z.infer<typeof TenantConfigSchema>;

/** What a caller's tenant and credential are, and how the service is set up (MCP tenant://config, GET /api/v1/config). */
export async function tenantConfig(
  read: Readers,
  caller: Caller,
  service: Record<string, unknown>,
): Promise<TenantConfig> {
  const tenant = await read.tenants.get(caller.tenant);
  return {
    tenant_id: caller.tenant,
    name: tenant?.name ?? caller.tenant,
    created_at: tenant?.created_at ?? null,
    credential: {
      type: caller.principal.type,
      id: caller.principal.id,
      scopes: [...caller.principal.scopes].sort(),
    },
    service,
  };
}
