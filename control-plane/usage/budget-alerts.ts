import { randomUUID } from 'node:crypto';
import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import {
  isExhausted,
  microsToUsd,
  newlyCrossedAlerts,
  percents,
  type AlertThreshold,
  type Budget,
} from '../../core/domain/index.ts';
import type { BudgetAlertMessage } from '../../core/events/messages.ts';
import type { Effects } from '../effects/effects.ts';
import type { Repositories } from '../storage/storage.ts';

export interface AlertOutcome {
  /** Whether the budget's live envelopes must end now. */
  terminate: boolean;
  reason: string | null;
}

const EXCEEDED: AlertThreshold = { percent: 100, action: 'terminate' };

/**
 * Fires the thresholds the usage has reached, each once per period: a warning (below 100 %) or
 * exceeded (100 %) event, its webhook, and with action `terminate` the end of the budget's
 * envelopes. Reaching 100 % of any limit always raises exceeded and ends the envelopes, even
 * when no configured threshold says so: an exhausted budget cannot carry running work.
 * `budget` is as the usage change in this transaction left it; a threshold is announced only by
 * the transaction that marks it fired, so concurrent replicas announce it once.
 */
export async function fireAlerts(
  tx: Repositories,
  budget: Budget,
  envelopeId: string | null,
  now: Date,
  effects: Effects,
): Promise<AlertOutcome> {
  const crossed = newlyCrossedAlerts(budget);
  const candidates = crossed.map((p) => budget.alerts.find((a) => a.percent === p)!);
  const exhausted = isExhausted(budget);
  if (exhausted && !budget.usage.alerts_fired.includes(100) && !crossed.includes(100)) candidates.push(EXCEEDED);
  const marked =
    candidates.length === 0
      ? []
      : await tx.budgets.markAlertsFired(
          budget.tenant_id,
          budget.budget_id,
          budget.usage.period_start,
          candidates.map((t) => t.percent),
        );
  const thresholds = candidates.filter((t) => marked.includes(t.percent));
  if (thresholds.length === 0) return { terminate: false, reason: null };

  const p = percents(budget);
  let terminate = false;
  let reason: string | null = null;
  for (const threshold of thresholds) {
    const level = threshold.percent >= 100 ? 'exceeded' : 'warning';
    const message: BudgetAlertMessage = {
      tenant_id: budget.tenant_id,
      budget_id: budget.budget_id,
      budget_name: budget.name,
      level,
      threshold_percent: threshold.percent,
      action: threshold.action,
      percent_used: Math.round(p.highest * 100) / 100,
      tokens_used: budget.usage.tokens_input + budget.usage.tokens_output,
      cost_usd: microsToUsd(budget.usage.cost_micros),
      limits: { max_tokens: budget.limits.max_tokens, max_cost_usd: budget.limits.max_cost_usd },
      period_start: budget.usage.period_start,
      period_end: budget.usage.period_end,
      envelope_id: envelopeId,
      occurred_at: now.toISOString(),
    };
    const msgId = msgIds.budgetAlert(budget.tenant_id, budget.budget_id, budget.usage.period_start, threshold.percent);
    const subject =
      level === 'exceeded' ? subjects.budgetExceeded(budget.tenant_id) : subjects.budgetWarning(budget.tenant_id);
    effects.publications.push({ subject, data: message, msgId });
    if (threshold.webhook_url !== undefined) {
      effects.webhooks.push({
        tenant: budget.tenant_id,
        url: threshold.webhook_url,
        body: { type: `budget.${level}`, ...message },
        deliveryId: randomUUID(),
      });
    }
    if (threshold.action === 'terminate' && (threshold.percent < 100 || exhausted)) {
      terminate = true;
      reason = `budget ${budget.budget_id} reached ${threshold.percent}% (action terminate)`;
    }
  }
  if (exhausted) {
    terminate = true;
    reason = `budget ${budget.budget_id} exhausted`;
  }
  return { terminate, reason };
}
