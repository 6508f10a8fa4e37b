import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { CreateTenantRequestSchema, TenantSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import type { AuditLog } from '../../audit/audit-log.ts';
import { actorOf } from '../../caller.ts';
import type { Store } from '../../store/store.ts';
import type { Tenants } from '../../tenants/tenants.ts';
import type { RouteTable } from '../route.ts';

export function tenantRoutes(routes: RouteTable, deps: { tenants: Tenants; store: Store; audit: AuditLog; clock: () => Date }): void {
  const { tenants, store, audit, clock } = deps;
  routes.add({
    method: 'POST', path: '/v1/tenants', operationId: 'createTenant', tag: 'tenancy', access: 'administrator',
    summary: 'Create a tenant (platform administrators only)', body: CreateTenantRequestSchema, tenantFromInput: false,
    responses: { 201: { description: 'created', schema: TenantSchema }, 409: { description: 'tenant id taken (SVC-SYS-9008)', schema: ErrorBodySchema } },
    handler: ({ caller, body }) => {
      const tenant = store.transaction(() => {
        const created = tenants.create({ tenant_id: body.tenant_id ?? randomUUID(), name: body.name, created_at: clock().toISOString() });
        audit.append(created.tenant_id, { actor: actorOf(caller.principal), action: 'tenant.create', resource: { type: 'tenant', id: created.tenant_id }, result: 'created', metadata: { name: created.name } });
        return created;
      });
      return { status: 201, body: tenant };
    },
  });
  routes.add({
    method: 'GET', path: '/v1/tenants', operationId: 'listTenants', tag: 'tenancy', access: 'administrator',
    summary: 'List tenants (platform administrators only)',
    responses: { 200: { description: 'tenants', schema: z.array(TenantSchema) } },
    handler: () => ({ status: 200, body: tenants.list() }),
  });
}
