import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import type { Budget } from '../../core/domain/index.ts';
import type { BudgetOverrunPredictedMessage } from '../../core/events/messages.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import { switchedOff } from '../features/features.ts';
import type { Tenants } from '../tenants/tenants.ts';
import type { Oracle } from './oracle.ts';

export interface OverrunWatchDeps {
  tenants: Tenants;
  budgets: Budgets;
  oracle: Oracle;
  effects: EffectDispatcher;
  clock: () => Date;
  logger: Logger;
  /** A probability at or above this raises `budgets.overrun_predicted`. */
  threshold: number;
}

const DEDUP_SCOPE = 'oracle.overrun';
/** The feature a tenant's admin switches off to stop these warnings for the tenant. */
const OVERRUN_WATCH = 'oracle_overrun_watch';

/**
 * The Oracle's background job (run by the job runner on one replica at a time): asks the Oracle
 * about every active budget with a limit and a period end, and raises `budgets.overrun_predicted`
 * (bus, through the outbox, and the budget's alert webhooks) when the probability of an overrun
 * reaches the threshold, once per budget and period. Tenants that switched the feature off are
 * passed over.
 */
export class OverrunWatch {
  readonly #deps: OverrunWatchDeps;

  constructor(deps: OverrunWatchDeps) {
    this.#deps = deps;
  }

  /** One round; resolves with how many predictions it announced. */
  async runOnce(signal?: AbortSignal): Promise<number> {
    let announced = 0;
    for (const tenant of await this.#deps.tenants.list()) {
      if (switchedOff(tenant, OVERRUN_WATCH)) continue;
      for (const budget of await this.#deps.budgets.list(tenant.tenant_id, 'active')) {
        if (signal?.aborted === true) return announced;
        try {
          if (await this.#consider(budget)) announced++;
        } catch (error) {
          // One budget's failure (its history unreadable) must not stop the others.
          this.#deps.logger.warn({ err: error, budget_id: budget.budget_id }, 'overrun watch: prediction failed');
        }
      }
    }
    return announced;
  }

  async #consider(budget: Budget): Promise<boolean> {
    const prediction = await this.#deps.oracle.predict(budget);
    if (prediction.probability === null || prediction.probability < this.#deps.threshold) return false;
    if (prediction.dimension === 'workload') return false;
    const message: BudgetOverrunPredictedMessage = {
      tenant_id: budget.tenant_id,
      budget_id: budget.budget_id,
      budget_name: budget.name,
      dimension: prediction.dimension,
      probability: prediction.probability,
      threshold: this.#deps.threshold,
      limit: prediction.limit,
      spent: prediction.spent,
      expected_spend_at_end: prediction.expected_spend_at_end,
      expected_exhaustion_at: prediction.expected_exhaustion_at,
      trend: prediction.trend,
      period_start: budget.usage.period_start,
      period_end: prediction.period_end,
      occurred_at: this.#deps.clock().toISOString(),
    };
    const key = `${budget.budget_id}:${budget.usage.period_start}`;
    return this.#deps.effects.commit(async (tx, effects) => {
      if (!(await tx.dedup.markProcessed(budget.tenant_id, DEDUP_SCOPE, key, message.occurred_at))) return false;
      effects.publications.push({
        subject: subjects.budgetOverrunPredicted(budget.tenant_id),
        data: message,
        msgId: msgIds.overrunPredicted(budget.tenant_id, budget.budget_id, budget.usage.period_start),
      });
      for (const url of new Set(budget.alerts.flatMap((a) => (a.webhook_url === undefined ? [] : [a.webhook_url]))))
        effects.webhooks.push({
          tenant: budget.tenant_id,
          url,
          body: { type: 'budget.overrun_predicted', ...message },
          deliveryId: randomUUID(),
        });
      return true;
    });
  }
}
