import type { Messaging, Subscription } from '../../core/bus/bus.ts';
import { parseOrThrow, SvcError } from '../../core/errors/index.ts';
import { LeaseRequestSchema, type LeaseGrant } from '../../core/sync/contract.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { LeaseLedger } from '../leases/lease-ledger.ts';

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
    const tenant = subject.split('.')[1] ?? '';
    const request = parseOrThrow(LeaseRequestSchema, data, 'lease request');
    if (request.tenant_id !== tenant) {
      throw new SvcError(
        'SVC-SYS-9004',
        `lease request for tenant ${request.tenant_id} on tenant ${tenant}'s subject`,
        {},
        [{ field: 'tenant_id', description: 'differs from the subject tenant' }],
      );
    }
    return deps.effects.commit(async (tx, effects): Promise<LeaseGrant> => {
      const grant = await deps.leases.handle(tx, tenant, request);
      effects.changes.push({ kind: 'budget', tenant, budgetId: request.budget_id });
      return grant;
    });
  });
}
