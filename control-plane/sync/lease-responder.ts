import type { Messaging, Subscription } from '../../core/bus/bus.ts';
import { parseOrThrow, SvcError } from '../../core/errors/index.ts';
import { LeaseRequestSchema, type LeaseGrant } from '../../core/sync/contract.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import { noEffects } from '../effects/effects.ts';
import type { LeaseLedger } from '../leases/lease-ledger.ts';
import type { Store } from '../store/store.ts';

/**
 * Answers lease requests from every tenant's proxies. The tenant is taken from the subject, which
 * a proxy's credentials confine to its own tenant; a body naming another tenant is refused.
 */
export async function serveLeases(deps: {
  messaging: Messaging;
  store: Store;
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
    const grant: LeaseGrant = deps.store.transaction(() => deps.leases.handle(tenant, request));
    await deps.effects.dispatch({ ...noEffects(), changes: [{ kind: 'budget', tenant, budgetId: request.budget_id }] });
    return grant;
  });
}
