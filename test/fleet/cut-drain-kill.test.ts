import { describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { eventually } from '../harness/control-plane.ts';
import { failure } from '../harness/failure.ts';
import { useFleet } from '../harness/fleet.ts';
import { openAiClient } from '../proxy/sdk-options.ts';

const fleet = useFleet({ tenants: { drain: { max_cost_usd: 100, max_tokens: 100_000_000 } } });

/** The tenant's `llm.call` events recorded for the request with this x-request-id. */
async function recorded(tenantId: string, requestId: string): Promise<UsageEventMessage[]> {
  const res = await fleet.cp.rest('GET', '/v1/events?event_type=llm.call&limit=1000', { tenant: tenantId });
  expect(res.status).toBe(200);
  return (res.body as unknown as UsageEventMessage[]).filter((e) => e.payload.request_id === requestId);
}

describe('the proxy process killed with SIGKILL while it drains a stream it cut', () => {
  it('has the call charged its worst case, written before the drain, once it starts again; once only', async () => {
    const tenant = fleet.tenant('drain');
    const proxy = await fleet.proxy(tenant);
    await proxy.start();
    const created = await fleet.cp.rest('POST', '/v1/envelopes', {
      tenant: tenant.tenantId,
      body: { budget_id: tenant.budgetId, adapter_type: 'custom' },
    });
    expect(created.status).toBe(201);
    const envelopeId = String(created.body.envelope_id);
    const id = 'cut-then-killed';
    // 400 pieces 100 ms apart: 40 s of answer, more than the 30 s drain bound, so its rest is
    // still being read when the proxy is killed.
    const agent = proxy.agent();
    const client = openAiClient(agent, {
      'X-Svc-Envelope-Id': envelopeId,
      'x-request-id': id,
      'x-sim-chunk-delay-ms': '100',
    });
    const stream = await client.chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 400, stream: true, messages: [{ role: 'user', content: 'talk' }] },
      { maxRetries: 0 },
    );
    let received = 0;
    const error = await failure(async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content && ++received === 3) {
          const terminated = await fleet.cp.rest('POST', `/v1/envelopes/${envelopeId}/terminate`, {
            tenant: tenant.tenantId,
            body: { reason: 'operator stop' },
          });
          expect(terminated.status).toBe(200);
        }
      }
    });
    await agent.close();
    expect((error as Error).message).toContain('SVC-ENV-1003');
    // The agent's answer ended at the cut; the proxy is still draining the provider's.
    const answer = fleet.sim.requests.find((r) => r.headers['x-request-id'] === id);
    expect(answer?.status).toBeUndefined();
    expect(await recorded(tenant.tenantId, id)).toEqual([]);

    await proxy.kill();
    await proxy.start();
    const events = await eventually(
      () => recorded(tenant.tenantId, id),
      (found) => found.length > 0,
      20_000,
    );
    expect(events).toHaveLength(1);
    expect(events[0]!.tokens.output).toBe(400);
    expect(events[0]!.payload).toMatchObject({ charged: 'worst_case', cut_off: 'terminated' });
    // Published again by nothing: a later look still finds it once.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await recorded(tenant.tenantId, id)).toHaveLength(1);
  }, 90_000);
});
