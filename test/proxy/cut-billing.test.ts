import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { cost } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { TextSample } from '../../proxy/governance/text-sample.ts';
import { createAdapterDeps, createOpenAiAdapter } from '../../proxy/providers/index.ts';
import { eventually } from '../harness/control-plane.ts';
import { failure } from '../harness/failure.ts';
import { startProxyRig, TENANT, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';
import { terminatedMidStream } from './terminated-mid-stream.ts';

/** Well under the rest of the stalled stream below (300 chunks, 50 ms apart). */
const DRAIN_MS = 3000;
let rig: ProxyRig;
const tokens = createTokenCounter();

beforeAll(async () => {
  // A $0.001 budget bound to the sidecar, for an unclassified answer it cannot cover.
  rig = await startProxyRig({ proxy_abort_drain_ms: DRAIN_MS }, { budgetsUsd: [0.001] });
});
afterAll(async () => {
  await rig.close();
  tokens.free();
});

const sentFor = (requestId: string) => rig.sim.requests.find((r) => r.headers['x-request-id'] === requestId)?.usageSent;

const recordedYet = (requestId: string) =>
  rig.cp.published.some(
    (m) =>
      m.subject === `svc.${TENANT}.events.llm.call` && (m.data as UsageEventMessage).payload.request_id === requestId,
  );

/** A model asked to call `search` with arguments no tool reads one way: the proxy refuses them mid-stream. */
const duplicateKey = (requestId: string) =>
  openAiClient(rig.agent, {
    'x-request-id': requestId,
    'X-Svc-Execution-Id': `exec-${requestId}`,
    'x-sim-input-tokens': '100000',
    'x-sim-output-tokens': '40',
    'x-sim-tool-call': 'search',
    'x-sim-tool-args': '{"q":"x","q":"y"}',
  });

describe('a stream the proxy cuts is charged what the provider reports', () => {
  it('an OpenAI chat stream cut at a tool call it cannot judge: the usage chunk after it is still read', async () => {
    const id = 'cut-chat-duplicate-key';
    const error = await failure(async () => {
      const stream = await duplicateKey(id).chat.completions.create({
        model: 'gpt-4o',
        stream: true,
        max_completion_tokens: 2000,
        messages: [{ role: 'user', content: 'call search' }],
        tools: [{ type: 'function', function: { name: 'search', parameters: { type: 'object' } } }],
      });
      for await (const chunk of stream) void chunk;
    });
    expect((error as Error).message).toContain('SVC-SYS-9002');
    const event = await rig.usageEvent(id);
    const sent = sentFor(id);
    expect(sent).toMatchObject({ input: 100_000, output: 40 });
    expect(event.tokens).toEqual({ input: 100_000, output: 40 });
    expect(event.payload).toMatchObject({ charged: 'usage', usage_source: 'provider', cut_off: 'policy' });
    expect(event.cost_usd).toBe(rig.priced('gpt-4o', sent));
  });

  it('a Responses stream cut at a tool call it cannot judge: response.completed is still read', async () => {
    const id = 'cut-responses-duplicate-key';
    const error = await failure(async () => {
      const stream = await duplicateKey(id).responses.create({
        model: 'gpt-4o',
        stream: true,
        max_output_tokens: 2000,
        input: 'call search',
        tools: [{ type: 'function', name: 'search', parameters: { type: 'object' }, strict: false }],
      });
      for await (const event of stream) void event;
    });
    expect((error as Error).message).toContain('SVC-SYS-9002');
    const event = await rig.usageEvent(id);
    expect(event.tokens).toEqual({ input: 100_000, output: 40 });
    expect(event.payload).toMatchObject({ charged: 'usage', usage_source: 'provider', cut_off: 'policy' });
    expect(event.cost_usd).toBe(rig.priced('gpt-4o', sentFor(id)));
  });

  it('a cut stream whose usage does not come within the drain bound: the agent is answered at once, the call charged its worst case', async () => {
    const id = 'cut-stalled';
    const body = {
      model: 'gpt-4o-mini',
      max_tokens: 300,
      stream: true as const,
      messages: [{ role: 'user' as const, content: 'talk' }],
    };
    const client = openAiClient(rig.agent, {
      'x-request-id': id,
      'X-Svc-Execution-Id': `exec-${id}`,
      'x-sim-chunk-delay-ms': '50',
    });
    const { error } = await terminatedMidStream(rig, client, body);
    expect((error as Error).message).toContain('SVC-ENV-1003');
    // The agent's stream ended at the cut, while the proxy still drains the provider's.
    expect(recordedYet(id)).toBe(false);
    const event = await rig.usageEvent(id);
    const input = createOpenAiAdapter(createAdapterDeps(tokens, rig.prices)).parseRequest(
      'chat',
      body,
      '/v1/chat/completions',
    ).estimatedInputTokens;
    expect(event.tokens).toEqual({ input, output: 300 });
    expect(event.payload).toMatchObject({ charged: 'worst_case', cut_off: 'terminated' });
    expect(event.cost_usd).toBe(cost(rig.prices, 'gpt-4o-mini', { input, output: 300, cachedInput: 0 }).costUsd);
  });
});

describe('an unclassified answer the proxy cuts is charged as a cut stream is', () => {
  it('whose envelope is terminated mid-answer: its answer ends at once, the rest is drained and estimated', async () => {
    const id = 'unclassified-terminated';
    const body = JSON.stringify({ model: 'gpt-4o-mini', prompt: 'a lighthouse' });
    // 8 pieces of 16 KiB, 200 ms apart: about 1.4 s after the first, within the drain bound.
    const imageBytes = 120_000;
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-svc-execution-id': `exec-${id}`,
        'x-request-id': id,
        'x-sim-image-bytes': String(imageBytes),
        'x-sim-chunk-delay-ms': '200',
        'x-sim-chunked': '1',
      },
      body,
    });
    expect(res.status).toBe(200);
    const envelopeId = String(res.headers.get('x-svc-envelope-id'));
    await eventually(
      () => rig.envelope(envelopeId),
      (e) => e !== undefined,
    );
    let terminatedAt = 0;
    let terminated = 0;
    const error = await failure(async () => {
      for await (const chunk of res.body!) {
        void chunk;
        if (terminatedAt > 0) continue;
        terminatedAt = Date.now();
        terminated = (await rig.admin('POST', `/v1/envelopes/${envelopeId}/terminate`, { reason: 'stop' })).status;
      }
    });
    expect(terminated).toBe(200);
    // Ended by the termination, not by the answer's end: the connection closed, no error event
    // being known for an answer of no known format.
    expect(error).toBeInstanceOf(TypeError);
    expect(Date.now() - terminatedAt).toBeLessThan(1000);
    const event = await rig.usageEvent(id);
    const sample = new TextSample();
    sample.push(
      Buffer.from(
        JSON.stringify({ created: 1_700_000_000, data: [{ b64_json: 'iVBORw0KGgo=' + 'A'.repeat(imageBytes) }] }),
      ),
    );
    expect(event.tokens.output).toBe(await sample.tokens(tokens, 'gpt-4o-mini'));
    expect(event.payload).toMatchObject({ operation: 'unclassified', charged: 'estimate', cut_off: 'terminated' });
  });

  it('whose rest does not come within the drain bound: charged its worst case, one token per byte of the length it declared', async () => {
    const id = 'unclassified-cut-stalled';
    const body = JSON.stringify({ model: 'gpt-4o-mini', prompt: 'a lighthouse' });
    const imageBytes = 2_000_000;
    // 123 pieces of 16 KiB, 50 ms apart: about 6 s, twice the drain bound. Cut at its first piece,
    // before its headers went out: the agent's request fails.
    const started = Date.now();
    await expect(
      fetch(`${rig.addresses.proxyUrl}/openai/v1/images/generations`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-svc-execution-id': `exec-${id}`,
          'x-svc-budget-id': rig.boundBudgets[0]!,
          'x-request-id': id,
          'x-sim-image-bytes': String(imageBytes),
          'x-sim-chunk-delay-ms': '50',
        },
        body,
      }).then((res) => res.text()),
    ).rejects.toThrow();
    // The agent's answer ended at the cut, not after the drain.
    expect(Date.now() - started).toBeLessThan(DRAIN_MS);
    const event = await rig.usageEvent(id);
    const sample = new TextSample();
    sample.push(Buffer.from(body));
    const input = await sample.tokens(tokens, 'gpt-4o-mini');
    const declared = JSON.stringify({
      created: 1_700_000_000,
      data: [{ b64_json: 'iVBORw0KGgo=' + 'A'.repeat(imageBytes) }],
    }).length;
    expect(event.tokens).toEqual({ input, output: declared });
    expect(event.payload).toMatchObject({ operation: 'unclassified', charged: 'worst_case', cut_off: 'budget' });
    expect(event.cost_usd).toBe(cost(rig.prices, 'gpt-4o-mini', { input, output: declared, cachedInput: 0 }).costUsd);
  });
});
