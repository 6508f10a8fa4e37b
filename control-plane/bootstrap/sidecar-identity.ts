import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { NO_LIMITS, freshUsage, SYSTEM_TENANT, type Budget } from '../../core/domain/index.ts';
import type { ControlPlane } from '../create-control-plane.ts';
import { SYSTEM_ACTOR } from '../caller.ts';
import { randomUUID } from 'node:crypto';

export const SidecarIdentitySchema = z.object({
  tenant_id: z.string(),
  budget_id: z.string(),
  api_key: z.string(),
});
export type SidecarIdentity = z.infer<typeof SidecarIdentitySchema>;

const SIDECAR_SCOPES = ['envelopes:read', 'envelopes:write', 'budgets:read', 'policies:read', 'events:read'] as const;

/**
 * Standalone first start: the sidecar's tenant (`default`, or the configured id), an unlimited
 * default budget and the sidecar's API key, created once and kept in `sidecar-identity.json`
 * (mode 0600) under the data directory so that later starts reuse them. Configured ids win.
 */
export async function ensureSidecarIdentity(
  plane: ControlPlane,
  options: { dataDir: string; tenantId?: string | undefined; budgetId?: string | undefined; clock?: () => Date },
): Promise<{ identity: SidecarIdentity; created: boolean }> {
  const file = join(options.dataDir, 'sidecar-identity.json');
  const clock = options.clock ?? (() => new Date());
  const saved = existsSync(file) ? SidecarIdentitySchema.parse(JSON.parse(readFileSync(file, 'utf8'))) : undefined;
  const tenantId = options.tenantId ?? saved?.tenant_id ?? 'default';
  if (
    saved !== undefined &&
    saved.tenant_id === tenantId &&
    (await plane.services.budgets.find(tenantId, options.budgetId ?? saved.budget_id)) !== undefined
  ) {
    return { identity: { ...saved, budget_id: options.budgetId ?? saved.budget_id }, created: false };
  }
  const { services } = plane;
  const now = clock();
  const identity = await plane.effects.commit(async (tx, effects) => {
    if (tenantId !== SYSTEM_TENANT && (await tx.tenants.get(tenantId)) === undefined) {
      await services.tenants.create(tx, { tenant_id: tenantId, name: tenantId, created_at: now.toISOString() });
      await services.audit.append(tx, tenantId, {
        actor: SYSTEM_ACTOR,
        action: 'tenant.create',
        resource: { type: 'tenant', id: tenantId },
        result: 'created',
        metadata: { reason: 'standalone first start' },
      });
    }
    let budgetId = options.budgetId;
    if (budgetId === undefined || (await services.budgets.find(tenantId, budgetId, tx)) === undefined) {
      const base = { period: 'total' as const, created_at: now.toISOString() };
      const budget: Budget = {
        budget_id: budgetId ?? randomUUID(),
        tenant_id: tenantId,
        name: 'default',
        description: 'unlimited default budget of the sidecar',
        type: 'hybrid',
        period: 'total',
        limits: { ...NO_LIMITS },
        alerts: [],
        expires_at: null,
        workflow_id: null,
        tags: { source: 'standalone' },
        usage: freshUsage(base, now),
        created_at: base.created_at,
        updated_at: base.created_at,
      };
      await services.budgets.insert(tx, tenantId, budget);
      await services.audit.append(tx, tenantId, {
        actor: SYSTEM_ACTOR,
        action: 'budget.create',
        resource: { type: 'budget', id: budget.budget_id },
        result: 'created',
        metadata: { reason: 'standalone first start' },
      });
      budgetId = budget.budget_id;
    }
    const key = await services.keys.create(
      tx,
      tenantId,
      { name: 'sidecar', scopes: [...SIDECAR_SCOPES], expires_in_seconds: 0 },
      now,
    );
    await services.audit.append(tx, tenantId, {
      actor: SYSTEM_ACTOR,
      action: 'api_key.create',
      resource: { type: 'api_key', id: key.record.id },
      result: 'created',
      metadata: { name: 'sidecar' },
    });
    effects.changes.push({ kind: 'ruleset', tenant: tenantId }, { kind: 'budget', tenant: tenantId, budgetId });
    return { tenant_id: tenantId, budget_id: budgetId, api_key: key.secret };
  });
  writeFileSync(file, JSON.stringify(identity, null, 2), { mode: 0o600 });
  chmodSync(file, 0o600);
  return { identity, created: true };
}
