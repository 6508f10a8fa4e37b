import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { metricValue } from '../proxy-net/harness.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { TextSample } from '../../proxy/governance/text-sample.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  // Three $0.001 budgets bound to the sidecar; no-such-budget is bound too, but the control plane does not know it.
  rig = await startProxyRig({ allowed_budget_ids: 'no-such-budget' }, { budgetsUsd: [0.001, 0.001, 0.001] });
});
afterAll(async () => {
  await rig.close();
  tokens.free();
});

const tokens = createTokenCounter();
/** The proxy's estimate of an unclassified body: gpt-4o-mini's tokenizer on a sample, scaled. */
async function estimate(text: string): Promise<number> {
  const sample = new TextSample();
  sample.push(Buffer.from(text));
  return sample.tokens(tokens, 'gpt-4o-mini');
}

function bound(index: number): string {
  const id = rig.boundBudgets[index];
  if (id === undefined) throw new Error(`no bound budget ${index}`);
  return id;
}

async function refusal(promise: Promise<unknown>): Promise<APIError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof APIError) return error;
    throw error;
  }
  throw new Error('the call was not refused');
}

describe('a small cost budget', () => {
  it('refuses a later call at once with 422 SVC-BUD-3001, and the SDK does not retry it', async () => {
    const budgetId = bound(0);
    // 2000 input + 2000 output tokens of gpt-4o-mini cost $0.0015: more than the whole budget.
    const spender = openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-spender',
      'X-Svc-Budget-Id': budgetId,
      'x-sim-input-tokens': '2000',
    });
    await spender.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 2000,
      messages: [{ role: 'user', content: 'spend' }],
    });
    // The control plane applies the usage event and publishes the budget as exhausted; the proxy's watch sees it.
    await eventually(
      () => rig.proxy.leases.peek(budgetId)?.mode,
      (mode) => mode === 'refused',
    );

    const before = rig.sim.requests.length;
    const later = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-later', 'X-Svc-Budget-Id': budgetId });
    const started = Date.now();
    const error = await refusal(
      later.chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'again' }],
      }),
    );
    expect(error.status).toBe(422);
    expect(error.code).toBe('SVC-BUD-3001');
    expect(error.message).toContain('SVC-BUD-3001');
    expect(error.headers?.get('x-should-retry')).toBe('false');
    // Refused by the local lease: no upstream request, no retry with backoff.
    expect(rig.sim.requests.length).toBe(before);
    expect(Date.now() - started).toBeLessThan(400);
    expect(await metricValue(rig.proxy.registry, 'svc_proxy_requests_total', { decision: 'budget_exceeded' })).toBe(1);
  });

  it('cuts a streamed answer that crosses the limit with an error event, and the envelope ends BUDGET_EXCEEDED', async () => {
    const budgetId = bound(1);
    const client = openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-stream-cut',
      'X-Svc-Budget-Id': budgetId,
      'X-Request-Id': 'stream-cut',
      'x-sim-input-tokens': '10',
    });
    const { data: stream, response } = await client.chat.completions
      .create({
        model: 'gpt-4o-mini',
        max_tokens: 4000,
        stream: true,
        messages: [{ role: 'user', content: 'long answer' }],
      })
      .withResponse();
    let received = 0;
    const error = await refusal(
      (async () => {
        for await (const chunk of stream) if (chunk.choices[0]?.delta.content) received++;
      })(),
    );
    expect(error.message).toContain('SVC-BUD-3001');
    // $0.001 buys about 1660 output tokens of gpt-4o-mini: cut well before the 4000 the simulator would send.
    expect(received).toBeGreaterThan(1600);
    expect(received).toBeLessThan(1670);
    expect(await metricValue(rig.proxy.registry, 'svc_proxy_cutoffs_total', { reason: 'budget' })).toBe(1);

    const envelopeId = String(response.headers.get('x-svc-envelope-id'));
    // The termination and the usage events reach the control plane by different ways: waited for both.
    const envelope = await eventually(
      () => rig.envelope(envelopeId),
      (e) => e?.state === 'TERMINATED' && e.cost_summary.cost_usd >= 0.001,
      10_000,
    );
    expect(envelope?.termination_reason).toBe('budget_exceeded');
    // The provider went on past the cut and bills all it generated: the rest of its stream was
    // read for its usage, and that is what the call is charged, not the text metered to the cut.
    const event = await rig.usageEvent('stream-cut');
    const sent = rig.sim.requests.find((r) => r.headers['x-request-id'] === 'stream-cut')?.usageSent;
    expect(sent?.output).toBe(4000);
    expect(event.tokens).toEqual({ input: sent?.input, output: 4000 });
    expect(event.payload).toMatchObject({ charged: 'usage', usage_source: 'provider', cut_off: 'budget' });
    expect(event.cost_usd).toBe(rig.priced('gpt-4o-mini', sent));
    expect(envelope?.cost_summary.cost_usd).toBeCloseTo(event.cost_usd ?? 0, 5);
  });

  it('cuts an unclassified answer the budget cannot cover as it arrives, charging the estimate of the whole answer the provider sent', async () => {
    const budgetId = bound(2);
    const cuts = () => metricValue(rig.proxy.registry, 'svc_proxy_cutoffs_total', { reason: 'budget' });
    const cutsBefore = await cuts();
    const body = JSON.stringify({ model: 'gpt-4o-mini', prompt: 'a lighthouse' });
    // gpt-4o-mini's output: $0.001 covers about 1,660 tokens, held at one per byte of the answer.
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-svc-execution-id': 'exec-unclassified-cut',
        'x-svc-budget-id': budgetId,
        'x-request-id': 'unclassified-cut',
        'x-sim-image-bytes': String(2_000_000),
        'x-sim-chunked': '1',
      },
      body,
    });
    expect(res.status).toBe(200);
    let received = 0;
    await expect(
      (async () => {
        for await (const chunk of res.body!) received += (chunk as Uint8Array).length;
      })(),
    ).rejects.toThrow();
    expect(received).toBeLessThan(20_000);
    const event = await rig.usageEvent('unclassified-cut');
    expect(await cuts()).toBe(cutsBefore + 1);
    // The provider generated the whole image, and bills it: the rest was read past the cut, and
    // the call is charged the estimate of all of it, far beyond what the budget had left.
    const answer = rig.sim.requests.find((r) => r.headers['x-request-id'] === 'unclassified-cut');
    expect(answer?.status).toBe(200);
    const usage = {
      input: await estimate(body),
      output: await estimate(
        JSON.stringify({ created: 1_700_000_000, data: [{ b64_json: 'iVBORw0KGgo=' + 'A'.repeat(2_000_000) }] }),
      ),
      cachedInput: 0,
    };
    expect(event.tokens).toEqual({ input: usage.input, output: usage.output });
    expect(event.payload).toMatchObject({ operation: 'unclassified', charged: 'estimate', cut_off: 'budget' });
    expect(event.cost_usd).toBe(rig.priced('gpt-4o-mini', usage));
    expect(event.cost_usd).toBeGreaterThan(0.01);
  });

  it('refuses a budget the control plane does not know with SVC-BUD-3002', async () => {
    const before = rig.sim.requests.length;
    const client = openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-unknown-budget',
      'X-Svc-Budget-Id': 'no-such-budget',
    });
    const error = await refusal(
      client.chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(error.code).toBe('SVC-BUD-3002');
    expect(error.status).toBe(404);
    expect(rig.sim.requests.length).toBe(before);
  });
});
