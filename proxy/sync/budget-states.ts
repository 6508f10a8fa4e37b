import type { KeyValueStores, Subscription } from '../../core/bus/bus.ts';
import { BUCKETS, BudgetStateSchema, keys, type BudgetState } from '../../core/sync/contract.ts';
import { watchTenantValues } from './tenant-values.ts';

/**
 * Watches the tenant's budget states, so a budget the control plane has found exhausted (or
 * expired) is refused here at once, without waiting for this proxy's next lease renewal.
 */
export function watchBudgetStates(
  keyValue: KeyValueStores,
  tenantId: string,
  onState: (state: BudgetState) => void,
  logger: { warn(object: Record<string, unknown>, message: string): void },
): Promise<Subscription> {
  return watchTenantValues(
    keyValue,
    { bucket: BUCKETS.budgets, filter: keys.budgetFilter, schema: BudgetStateSchema, what: 'budget state' },
    tenantId,
    onState,
    logger,
  );
}
