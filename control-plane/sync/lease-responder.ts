import type { Messaging, Subscription } from '../../core/bus/bus.ts';
import { parseOrThrow } from '../../core/errors/index.ts';
import { LeaseRequestSchema, type LeaseGrant } from '../../core/sync/contract.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { LeaseLedger } from '../leases/lease-ledger.ts';
import { subjectTenant } from './subject-tenant.ts';

/**
 * Answers lease requests from every tenant's proxies. The tenant is taken from the subject, which
 * a proxy's credentials confine to its own tenant; a body naming another tenant is refused.
 */
export async function serveLeases(deps: {
  messaging: Messaging;
  leases: LeaseLedger;
  effects: EffectDispatcher;
}): Promise<Subscription> {
  return deps.messaging.requests.reply('svc.*.leases.request', async (data, subject) => {
    const request = parseOrThrow(LeaseRequestSchema, data, 'lease request');
    const tenant = subjectTenant(subject, request.tenant_id, 'lease request');
    return deps.effects.commit(async (tx, effects): Promise<LeaseGrant> => {
      const grant = await deps.leases.handle(tx, tenant, request);
      effects.changes.push({ kind: 'budget', tenant, budgetId: request.budget_id });
      return grant;
    });
  });
}
