import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { CreateTenantRequestSchema, TenantSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import type { AuditLog } from '../../audit/audit-log.ts';
import { actorOf } from '../../caller.ts';
import type { EffectDispatcher } from '../../effects/dispatcher.ts';
import type { Storage } from '../../storage/storage.ts';
import type { Tenants } from '../../tenants/tenants.ts';
import type { WebhookSecrets } from '../../tenants/webhook-secrets.ts';
import type { RouteTable } from '../route.ts';

const CreatedTenantSchema = TenantSchema.extend({
  webhook_secret: z.string().describe('HMAC key of the alert webhooks of this tenant; shown only here'),
});

const RotatedSecretSchema = z.object({
  tenant_id: z.string(),
  webhook_secret: z.string().describe('the new HMAC key; shown only here'),
  previous_valid_until: z
    .string()
    .nullable()
    .describe('until then deliveries also carry a signature made with the replaced key'),
});

export function tenantRoutes(
  routes: RouteTable,
  deps: {
    tenants: Tenants;
    webhookSecrets: WebhookSecrets;
    storage: Storage;
    audit: AuditLog;
    effects: EffectDispatcher;
    clock: () => Date;
  },
): void {
  const { tenants, webhookSecrets, storage, audit, effects, clock } = deps;
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
      201: {
        description: 'created, with its webhook signing secret (shown once)',
        schema: CreatedTenantSchema,
      },
      409: { description: 'tenant id taken (SVC-SYS-9008)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, body }) => {
      const tenant = await effects.commit(async (tx, collected) => {
        const created = await tenants.create(tx, {
          tenant_id: body.tenant_id ?? randomUUID(),
          name: body.name,
          created_at: clock().toISOString(),
        });
        await audit.append(tx, created.tenant_id, {
          actor: actorOf(caller.principal),
          action: 'tenant.create',
          resource: { type: 'tenant', id: created.tenant_id },
          result: 'created',
          metadata: { name: created.name },
        });
        // A proxy fails closed until it holds its tenant's ruleset, so even an empty one is pushed now.
        collected.changes.push({ kind: 'ruleset', tenant: created.tenant_id });
        return { ...created, webhook_secret: await webhookSecrets.issue(tx, created.tenant_id) };
      });
      return { status: 201, body: tenant };
    },
  });
  routes.add({
    method: 'POST',
    path: '/v1/webhook-secret/rotate',
    operationId: 'rotateWebhookSecret',
    tag: 'tenancy',
    access: 'admin',
    summary: "Replace the tenant's webhook signing secret; the new one is returned once",
    tenantFromInput: false,
    responses: { 200: { description: 'the new secret', schema: RotatedSecretSchema } },
    handler: async ({ caller }) => {
      const rotated = await storage.withTransaction(async (tx) => {
        const next = await webhookSecrets.rotate(tx, caller.tenant);
        await audit.append(tx, caller.tenant, {
          actor: actorOf(caller.principal),
          action: 'webhook_secret.rotate',
          resource: { type: 'tenant', id: caller.tenant },
          result: 'rotated',
          metadata: { previous_valid_until: next.previous_valid_until },
        });
        return next;
      });
      return {
        status: 200,
        body: {
          tenant_id: caller.tenant,
          webhook_secret: rotated.secret,
          previous_valid_until: rotated.previous_valid_until,
        },
      };
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
    handler: async () => ({ status: 200, body: await tenants.list() }),
  });
}
