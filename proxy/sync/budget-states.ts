import type { KeyValueStores, Subscription } from '../../core/bus/bus.ts';
import { BUCKETS, BudgetStateSchema, keys, type BudgetState } from '../../core/sync/contract.ts';

/**
 * Watches the tenant's budget states, so a budget the control plane has found exhausted (or
 * expired) is refused here at once, without waiting for this proxy's next lease renewal.
 */
export async function watchBudgetStates(
  keyValue: KeyValueStores,
  tenantId: string,
  onState: (state: BudgetState) => void,
  logger: { warn(object: Record<string, unknown>, message: string): void },
): Promise<Subscription> {
  const bucket = await keyValue.open(BUCKETS.budgets);
  return bucket.watch(keys.budgetFilter(tenantId), (entry) => {
    if (entry.operation !== 'PUT') return;
    const parsed = BudgetStateSchema.safeParse(entry.value);
    if (!parsed.success || parsed.data.tenant_id !== tenantId) {
      logger.warn({ key: entry.key }, 'budget state does not parse; ignored');
      return;
    }
    onState(parsed.data);
  });
}
