import { timeOrderedUuid } from '../../core/domain/time-ordered-id.ts';

/** A usage event as a proxy publishes it for one model call, its id time-ordered as proxies mint them. */
export function benchUsageEvent(envelopeId: string, budgetId: string): { event_id: string } & Record<string, unknown> {
  return {
    // Time-ordered, as a proxy mints them (a random id costs LMDB a page per event: event-ids.ts).
    event_id: timeOrderedUuid(),
    tenant_id: 'bench',
    envelope_id: envelopeId,
    budget_id: budgetId,
    event_type: 'llm.call',
    timestamp: new Date().toISOString(),
    tokens: { input: 120, output: 40 },
    model: 'gpt-4o-mini',
    cost_usd: 0.000042,
    payload: {},
    source: 'proxy:bench',
  };
}
