/** The shape and size of the outbox entry of a proxy `llm.call` event, numbered `i`. */
export function callEvent(i: number) {
  return {
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    subject: 'svc.bench.events.llm.call',
    data: {
      event_id: String(i),
      tenant_id: 'bench',
      envelope_id: 'env-bench',
      budget_id: 'budget-bench',
      event_type: 'llm.call',
      timestamp: new Date().toISOString(),
      tokens: { input: 120, output: 40 },
      model: 'gpt-4o-mini',
      cost_usd: 0.000042,
      payload: { provider: 'openai', operation: 'chat', stream: false, request_id: `req-${i}`, tool_calls: [] },
      source: 'proxy:bench',
    },
  };
}
