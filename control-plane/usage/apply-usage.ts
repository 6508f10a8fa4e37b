import { detectionOfEvent } from '../../core/brain/immune/detection.ts';
import { SvcError } from '../../core/errors/index.ts';
import {
  chargedMicros,
  currentPeriod,
  isFinal,
  isoTime,
  isTerminated,
  modelCostId,
  MAX_TOTAL,
  MICROS_PER_USD,
  usdToMicros,
  type Budget,
  type CostTotals,
  type Envelope,
  type Overflow,
} from '../../core/domain/index.ts';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { SYSTEM_ACTOR } from '../caller.ts';
import type { Effects, ForeignClaim } from '../effects/effects.ts';
import { applyTransition } from '../envelopes/lifecycle.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Repositories } from '../storage/storage.ts';
import { fireAlerts } from './budget-alerts.ts';
import type { Pricer } from './pricer.ts';

export interface UsageDeps {
  audit: AuditLog;
  pricer: Pricer;
}

export interface UsageResult {
  duplicate: boolean;
  envelope: Envelope | null;
}

/**
 * Applies one usage event inside the caller's transaction: the envelope's cost summary, its own
 * limits, the budget's period usage and alerts, and the terminations those call for. The event id
 * is the idempotency key: an event applied before changes nothing, so replays never count twice.
 * Counters change by deltas in storage, the budget's first (every writer of a budget's usage takes
 * it before that budget's envelopes, so concurrent replicas wait on each other in one order).
 *
 * `strict` is the REST contract: an unknown envelope is 404, an ended one 409, and an event that
 * would carry a running total past its exact range is refused whole (SVC-EVT-4002). The event
 * processor is not strict: tokens a proxy reports after an envelope ended were still spent, so
 * they count toward the budget, and a total at its maximum stays there (see `Overflow`).
 * `recorded` is the event when the caller has stored it already (with others, in one statement)
 * and found it new.
 */
export async function applyUsage(
  deps: UsageDeps,
  tx: Repositories,
  event: UsageEventMessage,
  now: Date,
  effects: Effects,
  strict: boolean,
  recorded?: StoredEvent,
): Promise<UsageResult> {
  const tenant = event.tenant_id;
  const at = isoTime(now);
  const overflow: Overflow = strict ? 'refuse' : 'saturate';
  const stored = recorded ?? storedEvent(deps, event, at);
  if (recorded === undefined && (await tx.events.insertNew(tenant, [stored])).length === 0)
    return { duplicate: true, envelope: null };
  const costMicros = stored.cost_micros;

  const fromProxy = isProxyEvent(event);
  const named = await tx.envelopes.get(tenant, event.envelope_id);
  const envelope = named !== undefined && fromProxy && !actsOn(event, named, 'usage', effects) ? undefined : named;
  if (strict) {
    if (envelope === undefined)
      throw new SvcError('SVC-ENV-1001', `envelope ${event.envelope_id} not found`, { envelope_id: event.envelope_id });
    if (isFinal(envelope.status)) {
      const code = isTerminated(envelope.status) ? 'SVC-ENV-1003' : 'SVC-ENV-1004';
      throw new SvcError(code, `envelope ${envelope.envelope_id} has ended; it takes no more events`, {
        envelope_id: envelope.envelope_id,
        state: envelope.status,
      });
    }
  }

  // A detection a proxy (or a REST caller) reported becomes a record of its own, once: the
  // event is new here, and its id is the detection's.
  const detection = detectionOfEvent(stored);
  if (detection !== undefined) {
    const execution = detection.execution_id ?? envelope?.execution_id ?? null;
    if (await tx.detections.insert(tenant, { ...detection, execution_id: execution }))
      effects.detections.push(detection.kind);
  }

  const isLlm = event.event_type.startsWith('llm.');
  const isTool = event.event_type.startsWith('tool.');
  const budgetId = chargedBudget(event, envelope?.budget_id);
  let budget: Budget | undefined;
  if (budgetId !== null) {
    const before = await tx.budgets.get(tenant, budgetId);
    if (before !== undefined) {
      budget = await tx.budgets.addUsage(
        tenant,
        budgetId,
        {
          tokens_input: event.tokens.input,
          tokens_output: event.tokens.output,
          cost_micros: costMicros,
          executions: 0,
          llm_calls: isLlm ? 1 : 0,
          tool_calls: isTool ? 1 : 0,
        },
        currentPeriod(before, now),
        overflow,
        at,
      );
    }
  }

  let current: Envelope | null = null;
  if (envelope !== undefined) {
    const delta: CostTotals = {
      tokens_input: event.tokens.input,
      tokens_output: event.tokens.output,
      cost_micros: costMicros,
      llm_calls: isLlm ? 1 : 0,
      tool_calls: isTool ? 1 : 0,
      model_costs:
        event.model === null
          ? []
          : [
              {
                model_id: modelCostId(envelope.cost.model_costs, event.model),
                input_tokens: event.tokens.input,
                output_tokens: event.tokens.output,
                cost_micros: costMicros,
                call_count: 1,
              },
            ],
    };
    current = (await tx.envelopes.charge(tenant, envelope.envelope_id, delta, overflow, at)) ?? null;
    if (current?.status === 'AUTHORIZED') {
      current = await moved(deps, tx, current, 'RUNNING', 'first event recorded', now, effects, false);
    }
    const overLimit = current === null ? null : envelopeLimitReached(current);
    if (current !== null && overLimit !== null && !isFinal(current.status)) {
      current = await moved(deps, tx, current, 'BUDGET_EXCEEDED', overLimit, now, effects, true);
    }
  }

  if (budget !== undefined) {
    const alerts = await fireAlerts(tx, budget, event.envelope_id, now, effects);
    // A proxy's spend is also reported to the lease ledger; it stops holding it back once applied here.
    if (fromProxy) {
      await tx.leases.addSpend(tenant, budget.budget_id, budget.usage.period_start, 'applied', {
        tokens: event.tokens.input + event.tokens.output,
        micros: costMicros,
      });
    }
    // A batch charges the same budget event after event: one change of it tells the proxies.
    const last = effects.changes.at(-1);
    if (last?.kind !== 'budget' || last.tenant !== tenant || last.budgetId !== budget.budget_id)
      effects.changes.push({ kind: 'budget', tenant, budgetId: budget.budget_id });
    if (alerts.terminate) {
      let pageToken: string | null = null;
      do {
        const page = await tx.envelopes.listLive(tenant, budget.budget_id, { pageSize: 100, pageToken });
        for (const live of page.items) {
          const ended = await applyTransition(
            deps,
            tx,
            live,
            'BUDGET_EXCEEDED',
            { reason: alerts.reason, actor: SYSTEM_ACTOR, now, force: true },
            effects,
          );
          if (ended !== undefined && ended.envelope_id === current?.envelope_id) current = ended;
        }
        pageToken = page.nextPageToken;
      } while (pageToken !== null);
    }
  }
  return { duplicate: false, envelope: current };
}

/**
 * Whether a proxy's message may act on `envelope`: only when it charges the envelope's budget.
 * An agent names the envelope its calls belong to by id (one made through REST), so without this
 * any sidecar of the tenant could count its calls toward another execution's envelope, take it
 * to its limits, pause it or end it with a TERMINATE policy. A sidecar may charge only the
 * budgets it is bound to, which the envelope's execution's own sidecar is. A message that names
 * no budget is no sidecar's (each names the budget that admitted its call) and acts as it says.
 * A message that may not is recorded in `effects`, to be logged and counted once committed; it
 * still charges its budget.
 */
export function actsOn(
  message: { tenant_id: string; budget_id: string | null },
  envelope: Envelope,
  claim: ForeignClaim['claim'],
  effects: Effects,
): boolean {
  if (message.budget_id === null || message.budget_id === envelope.budget_id) return true;
  effects.foreignClaims.push({
    claim,
    tenant: message.tenant_id,
    envelopeId: envelope.envelope_id,
    envelopeBudget: envelope.budget_id,
    claimedBudget: message.budget_id,
  });
  return false;
}

function isProxyEvent(event: Pick<UsageEventMessage, 'source'>): boolean {
  return event.source.startsWith('proxy:');
}

/**
 * The budget an event is charged to. A proxy's call goes to the budget whose lease admitted it,
 * which its sidecar is bound to: an envelope the agent named by id (made through REST, on any
 * budget of the tenant) does not move the charge to its own budget. Any other event charges its
 * envelope's budget, else its own.
 */
export function chargedBudget(
  event: Pick<UsageEventMessage, 'source' | 'budget_id'>,
  envelopeBudget: string | null | undefined,
): string | null {
  if (isProxyEvent(event) && event.budget_id !== null) return event.budget_id;
  return envelopeBudget ?? event.budget_id;
}

/**
 * The event as stored, priced: its own cost when it carries one, else its model's tokens at the
 * price table's rate. A proxy's report is not bounded like a REST body: an absurd cost is charged
 * at the maximum.
 */
export function storedEvent(deps: UsageDeps, event: UsageEventMessage, receivedAt: string): StoredEvent {
  const costMicros = Math.min(
    MAX_TOTAL,
    event.cost_usd !== null
      ? chargedMicros(event.cost_usd * MICROS_PER_USD)
      : event.model !== null
        ? deps.pricer(
            event.model,
            event.tokens,
            typeof event.payload.provider === 'string' ? event.payload.provider : undefined,
          ).costMicros
        : 0,
  );
  return { ...event, cost_micros: costMicros, received_at: receivedAt };
}

/** The envelope moved by the system, or as it is now when another transaction moved it first. */
async function moved(
  deps: UsageDeps,
  tx: Repositories,
  envelope: Envelope,
  to: 'RUNNING' | 'BUDGET_EXCEEDED',
  reason: string,
  now: Date,
  effects: Effects,
  force: boolean,
): Promise<Envelope | null> {
  const next = await applyTransition(deps, tx, envelope, to, { reason, actor: SYSTEM_ACTOR, now, force }, effects);
  return next ?? (await tx.envelopes.get(envelope.tenant_id, envelope.envelope_id)) ?? null;
}

function envelopeLimitReached(envelope: Envelope): string | null {
  const { token_limit, cost_limit_usd } = envelope.governance;
  if (token_limit !== null && envelope.cost.tokens_input + envelope.cost.tokens_output >= token_limit)
    return `envelope token_limit ${token_limit} reached`;
  if (cost_limit_usd !== null && envelope.cost.cost_micros >= usdToMicros(cost_limit_usd))
    return `envelope cost_limit_usd ${cost_limit_usd} reached`;
  return null;
}
