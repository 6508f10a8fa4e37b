import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { CreateTenantRequestSchema, TenantSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import type { AuditLog } from '../../audit/audit-log.ts';
import { actorOf } from '../../caller.ts';
import type { EffectDispatcher } from '../../effects/dispatcher.ts';
import { noEffects } from '../../effects/effects.ts';
import type { Store } from '../../store/store.ts';
import type { Tenants } from '../../tenants/tenants.ts';
import type { RouteTable } from '../route.ts';

export function tenantRoutes(
  routes: RouteTable,
  deps: { tenants: Tenants; store: Store; audit: AuditLog; effects: EffectDispatcher; clock: () => Date },
): void {
  const { tenants, store, audit, effects, clock } = deps;
  routes.add({
    method: 'POST',
    path: '/v1/tenants',
    operationId: 'createTenant',
    tag: 'tenancy',
    access: 'administrator',
    summary: 'Create a tenant (platform administrators only)',
    body: CreateTenantRequestSchema,
    tenantFromInput: false,
    responses: {
      201: { description: 'created', schema: TenantSchema },
      409: { description: 'tenant id taken (SVC-SYS-9008)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, body }) => {
      const tenant = store.transaction(() => {
        const created = tenants.create({
          tenant_id: body.tenant_id ?? randomUUID(),
          name: body.name,
          created_at: clock().toISOString(),
        });
        audit.append(created.tenant_id, {
          actor: actorOf(caller.principal),
          action: 'tenant.create',
          resource: { type: 'tenant', id: created.tenant_id },
          result: 'created',
          metadata: { name: created.name },
        });
        return created;
      });
      // A proxy fails closed until it holds its tenant's ruleset, so even an empty one is pushed now.
      await effects.dispatch({ ...noEffects(), changes: [{ kind: 'ruleset', tenant: tenant.tenant_id }] });
      return { status: 201, body: tenant };
    },
  });
  routes.add({
    method: 'GET',
    path: '/v1/tenants',
    operationId: 'listTenants',
    tag: 'tenancy',
    access: 'administrator',
    summary: 'List tenants (platform administrators only)',
    responses: { 200: { description: 'tenants', schema: z.array(TenantSchema) } },
    handler: () => ({ status: 200, body: tenants.list() }),
  });
}
