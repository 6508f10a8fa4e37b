import { fetch } from 'undici';
import { describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { eventually } from '../harness/control-plane.ts';
import { failure } from '../harness/failure.ts';
import { useFleet } from '../harness/fleet.ts';
import { chat } from './agent-calls.ts';
import type { ProxyProcess } from '../harness/processes.ts';
import { openAiClient } from '../proxy/sdk-options.ts';

const fleet = useFleet({ tenants: { drain: { max_cost_usd: 100, max_tokens: 100_000_000 } } });

/** The tenant's `llm.call` events recorded for the request with this x-request-id. */
async function recorded(tenantId: string, requestId: string): Promise<UsageEventMessage[]> {
  const res = await fleet.cp.rest('GET', '/v1/events?event_type=llm.call&limit=1000', { tenant: tenantId });
  expect(res.status).toBe(200);
  return (res.body as unknown as UsageEventMessage[]).filter((e) => e.payload.request_id === requestId);
}

/** A started proxy of the tenant (with `env`) and an envelope opened for it at the control plane. */
async function proxyWithEnvelope(
  env: Record<string, string> = {},
): Promise<{ tenantId: string; proxy: ProxyProcess; envelopeId: string }> {
  const tenant = fleet.tenant('drain');
  const proxy = await fleet.proxy(tenant, env);
  await proxy.start();
  const created = await fleet.cp.rest('POST', '/v1/envelopes', {
    tenant: tenant.tenantId,
    body: { budget_id: tenant.budgetId, adapter_type: 'custom' },
  });
  expect(created.status).toBe(201);
  return { tenantId: tenant.tenantId, proxy, envelopeId: String(created.body.envelope_id) };
}

/**
 * Kills the proxy while the provider's answer to request `id` is still being drained (none is
 * recorded yet), `afterMs` from now, starts it again, and returns the call's events once one is
 * published; a later look must find no more.
 */
async function killedMidDrain(
  tenantId: string,
  proxy: ProxyProcess,
  id: string,
  afterMs: number,
): Promise<UsageEventMessage[]> {
  await new Promise((resolve) => setTimeout(resolve, afterMs));
  const answer = fleet.sim.requests.find((r) => r.headers['x-request-id'] === id);
  expect(answer?.status).toBeUndefined();
  expect(await recorded(tenantId, id)).toEqual([]);
  await proxy.kill();
  await proxy.start();
  const events = await eventually(
    () => recorded(tenantId, id),
    (found) => found.length > 0,
    20_000,
  );
  // Published again by nothing: a later look still finds it once.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(await recorded(tenantId, id)).toHaveLength(1);
  return events;
}

/**
 * A stream of 400 pieces 100 ms apart through the proxy: 40 s of answer, more than the 30 s drain
 * bound, so its rest is still being read when the proxy is killed.
 */
async function longStream(proxy: ProxyProcess, envelopeId: string, id: string) {
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
  return { agent, stream };
}

/** A whole-answer call of at most 300 tokens whose agent gives up on it after half a second. */
async function leftBeforeAnswer(proxy: ProxyProcess, headers: Record<string, string>): Promise<void> {
  const agent = proxy.agent();
  await failure(() =>
    openAiClient(agent, headers).chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 300, messages: [{ role: 'user', content: 'think' }] },
      { maxRetries: 0, signal: AbortSignal.timeout(500) },
    ),
  );
  await agent.close();
}

/** The proxy sees an agent's connection close within milliseconds; the drain has 30 s more. */
const SEEN_LEAVING_MS = 500;

describe('the proxy process killed with SIGKILL while it drains a stream it cut', () => {
  it.each([
    ['on the default store', 'cut-then-killed', {}],
    ['on a store that flushes each commit', 'cut-flushed-then-killed', { SVC_PROXY_FSYNC_INTERVAL_MS: '0' }],
  ])(
    'has the call charged its worst case, written before the drain, once it starts again; once only (%s)',
    async (_, id, env) => {
      const { tenantId, proxy, envelopeId } = await proxyWithEnvelope(env);
      const { agent, stream } = await longStream(proxy, envelopeId, id);
      let received = 0;
      const error = await failure(async () => {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content && ++received === 3) {
            const terminated = await fleet.cp.rest('POST', `/v1/envelopes/${envelopeId}/terminate`, {
              tenant: tenantId,
              body: { reason: 'operator stop' },
            });
            expect(terminated.status).toBe(200);
          }
        }
      });
      await agent.close();
      expect((error as Error).message).toContain('SVC-ENV-1003');

      // Killed as soon as the agent saw the cut.
      const events = await killedMidDrain(tenantId, proxy, id, 0);
      expect(events).toHaveLength(1);
      expect(events[0]!.tokens.output).toBe(400);
      expect(events[0]!.payload).toMatchObject({ charged: 'worst_case', cut_off: 'terminated' });
    },
    90_000,
  );
});

describe('the proxy process killed with SIGKILL while it drains an answer whose client left', () => {
  it('has a stream left midway charged its worst case once it starts again; once only', async () => {
    const { tenantId, proxy, envelopeId } = await proxyWithEnvelope();
    const id = 'left-stream-then-killed';
    const { agent, stream } = await longStream(proxy, envelopeId, id);
    let received = 0;
    // Leaving the loop aborts the request: the agent hangs up after three pieces.
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content && ++received === 3) break;
    await agent.close();

    const events = await killedMidDrain(tenantId, proxy, id, SEEN_LEAVING_MS);
    expect(events[0]!.tokens.output).toBe(400);
    expect(events[0]!.payload).toMatchObject({ charged: 'worst_case', cut_off: 'client_gone', aborted: true });
  }, 90_000);

  it('has a whole answer left before it came charged its worst case once it starts again; once only', async () => {
    const { tenantId, proxy, envelopeId } = await proxyWithEnvelope();
    const id = 'left-whole-then-killed';
    // The provider thinks 20 s before it answers.
    await leftBeforeAnswer(proxy, {
      'X-Svc-Envelope-Id': envelopeId,
      'x-request-id': id,
      'x-sim-first-byte-delay-ms': '20000',
    });

    const events = await killedMidDrain(tenantId, proxy, id, SEEN_LEAVING_MS);
    expect(events[0]!.tokens.output).toBe(300);
    expect(events[0]!.payload).toMatchObject({ charged: 'worst_case', cut_off: 'client_gone', aborted: true });
  }, 90_000);

  it('has an unclassified answer left midway charged its worst case once it starts again; once only', async () => {
    const { tenantId, proxy, envelopeId } = await proxyWithEnvelope();
    const id = 'left-unclassified-then-killed';
    const imageBytes = 2_000_000;
    // 123 pieces of 16 KiB, 200 ms apart: about 25 s of answer, within the 30 s drain bound.
    const agent = proxy.agent();
    const leave = new AbortController();
    const res = await fetch('https://api.openai.com/v1/images/generations', {
      method: 'POST',
      dispatcher: agent,
      signal: leave.signal,
      headers: {
        'content-type': 'application/json',
        'X-Svc-Envelope-Id': envelopeId,
        'x-request-id': id,
        'x-sim-image-bytes': String(imageBytes),
        'x-sim-chunk-delay-ms': '200',
      },
      body: JSON.stringify({ model: 'gpt-4o-mini', prompt: 'a lighthouse' }),
    });
    expect(res.status).toBe(200);
    await res.body!.getReader().read();
    leave.abort();
    await agent.close();

    const events = await killedMidDrain(tenantId, proxy, id, SEEN_LEAVING_MS);
    const declared = JSON.stringify({
      created: 1_700_000_000,
      data: [{ b64_json: 'iVBORw0KGgo=' + 'A'.repeat(imageBytes) }],
    }).length;
    expect(events[0]!.tokens.output).toBe(declared);
    expect(events[0]!.payload).toMatchObject({
      operation: 'unclassified',
      charged: 'worst_case',
      cut_off: 'client_gone',
      aborted: true,
    });
  }, 90_000);

  it('has nothing charged for an answer the provider refused after its client left', async () => {
    const { tenantId, proxy, envelopeId } = await proxyWithEnvelope();
    const id = 'left-then-refused';
    const headers = { 'X-Svc-Envelope-Id': envelopeId, 'x-request-id': id };
    await leftBeforeAnswer(proxy, {
      ...headers,
      'x-sim-first-byte-delay-ms': '1500',
      'x-sim-error-code': 'SVC-SYS-9001',
    });
    await eventually(
      () => fleet.sim.requests.find((r) => r.headers['x-request-id'] === id)?.status,
      (status) => status !== undefined,
      10_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    await proxy.kill();
    await proxy.start();
    // A call made after the restart is published after whatever the start released.
    const after = 'after-refused';
    expect(await chat(proxy, 'gpt-4o-mini', { headers: { ...headers, 'x-request-id': after } })).toEqual({
      status: 200,
      code: null,
    });
    await eventually(
      () => recorded(tenantId, after),
      (found) => found.length > 0,
      20_000,
    );
    expect(await recorded(tenantId, id)).toEqual([]);
  }, 90_000);
});

describe('the proxy process killed with SIGKILL while it counts the prompt of a call whose answer failed', () => {
  it('has the call charged its worst case once it starts again; once only', async () => {
    // A lease the prompt's bound (a token a byte) fits in.
    const { tenantId, proxy, envelopeId } = await proxyWithEnvelope({ SVC_PROXY_LEASE_TOKENS: '2000000' });
    const id = 'failed-then-killed-counting';
    // 420 KB of words: the count the worst case waits for (the proxy's first, which starts the
    // token thread and loads the encoding) takes seconds, the provider's reset milliseconds.
    let seed = 7;
    const words = Array.from({ length: 60_000 }, () => {
      seed = (seed * 48_271) % 2_147_483_647;
      return seed.toString(36).slice(0, 6);
    }).join(' ');
    const agent = proxy.agent();
    const answered = failure(() =>
      openAiClient(agent, {
        'X-Svc-Envelope-Id': envelopeId,
        'x-request-id': id,
        'x-sim-reset-after-bytes': '10',
      }).chat.completions.create(
        { model: 'gpt-4o-mini', max_tokens: 300, messages: [{ role: 'user', content: words }] },
        { maxRetries: 0 },
      ),
    );
    await eventually(
      () => fleet.sim.requests.some((r) => r.headers['x-request-id'] === id),
      (seen) => seen,
      20_000,
    );

    const events = await killedMidDrain(tenantId, proxy, id, 300);
    await answered;
    await agent.close();
    expect(events[0]!.tokens.input).toBeGreaterThanOrEqual(60_000);
    expect(events[0]!.tokens.output).toBe(300);
    expect(events[0]!.payload).toMatchObject({ charged: 'worst_case', cut_off: 'upstream_failed' });
  }, 90_000);
});
