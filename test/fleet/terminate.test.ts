import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import { type FleetTenant, type ProxyProcess } from '../harness/processes.ts';
import { openAiClient } from '../proxy/sdk-options.ts';
import { chat } from './agent-calls.ts';

const fleet = useFleet({ tenants: { cutoff: { max_cost_usd: 10, max_tokens: 10_000_000 } } });
let streaming: ProxyProcess;
let other: ProxyProcess;
let tenant: FleetTenant;

beforeAll(async () => {
  tenant = fleet.tenant('cutoff');
  // Slices well below the budget, so both proxies hold a lease.
  const env = { SVC_PROXY_LEASE_USD: '0.5' };
  streaming = await fleet.proxy(tenant, env);
  other = await fleet.proxy(tenant, env);
  await Promise.all([streaming.start(), other.start()]);
}, 60_000);

async function newEnvelope(): Promise<string> {
  const res = await fleet.cp.rest('POST', '/v1/envelopes', {
    tenant: tenant.tenantId,
    body: { budget_id: tenant.budgetId, adapter_type: 'custom' },
  });
  expect(res.status).toBe(201);
  return String(res.body.envelope_id);
}

/**
 * Streams a 20 s answer (400 chunks 50 ms apart) through `proxy` on `envelopeId`; after the third
 * chunk runs `act` (which should end the envelope somewhere else) and measures how long the
 * stream still ran.
 */
async function streamAndAct(
  proxy: ProxyProcess,
  envelopeId: string,
  act: () => Promise<void>,
): Promise<{ message: string; received: number; cutAfterMs: number }> {
  const agent = proxy.agent();
  const client = openAiClient(agent, { 'X-Svc-Envelope-Id': envelopeId, 'x-sim-chunk-delay-ms': '50' });
  const stream = await client.chat.completions.create(
    { model: 'gpt-4o-mini', max_tokens: 400, stream: true, messages: [{ role: 'user', content: 'talk' }] },
    { maxRetries: 0 },
  );
  let received = 0;
  let actedAt = 0;
  let message = 'the stream reached its end';
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content && ++received === 3) {
        actedAt = Date.now();
        await act();
      }
    }
  } catch (error) {
    message = (error as Error).message;
  } finally {
    await agent.close();
  }
  expect(actedAt).toBeGreaterThan(0);
  return { message, received, cutAfterMs: Date.now() - actedAt };
}

describe('an envelope terminated over REST', () => {
  it('has its in-flight stream cut at the proxy process carrying it within one second', async () => {
    const envelopeId = await newEnvelope();
    const cut = await streamAndAct(streaming, envelopeId, async () => {
      const terminated = await fleet.cp.rest('POST', `/v1/envelopes/${envelopeId}/terminate`, {
        tenant: tenant.tenantId,
        body: { reason: 'operator stop' },
      });
      expect(terminated.status).toBe(200);
    });
    expect(cut.message).toContain('SVC-ENV-1003');
    expect(cut.received).toBeLessThan(400);
    expect(cut.cutAfterMs).toBeLessThan(1000);
  }, 30_000);
});

describe('a budget exceeded at the control plane', () => {
  it('cuts an in-flight stream carried by a proxy process within one second, and every proxy refuses further calls', async () => {
    const streamed = await newEnvelope();
    const spender = await newEnvelope();
    const cut = await streamAndAct(streaming, streamed, async () => {
      // Spec 6.1: an event recorded over REST charges the budget; $20 on a $10 budget exceeds it.
      const charged = await fleet.cp.rest('POST', `/v1/envelopes/${spender}/events`, {
        tenant: tenant.tenantId,
        body: {
          event_type: 'llm.call',
          timestamp: new Date().toISOString(),
          model: 'gpt-4o',
          tokens: { input: 10, output: 10 },
          cost_usd: 20,
        },
      });
      expect(charged.status).toBe(202);
    });
    expect(cut.message).toMatch(/SVC-ENV-1003|SVC-BUD-3001/);
    expect(cut.received).toBeLessThan(400);
    expect(cut.cutAfterMs).toBeLessThan(1000);

    const envelope = await eventually(
      () => fleet.cp.rest('GET', `/v1/envelopes/${streamed}`, { tenant: tenant.tenantId }),
      (r) => r.body.state !== 'RUNNING' && r.body.state !== 'AUTHORIZED',
      5000,
    );
    expect(envelope.body.state).toBe('TERMINATED');
    // The budget's state reached the other proxy too: a new execution there is refused at once.
    const refused = await eventually(
      () => chat(other, 'gpt-4o-mini', { headers: { 'X-Svc-Execution-Id': 'after-exceeded' } }),
      (o) => o.status !== 200,
      2000,
    );
    expect(refused).toEqual({ status: 422, code: 'SVC-BUD-3001' });
  }, 40_000);
});
