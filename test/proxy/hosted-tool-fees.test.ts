import { APIError } from 'openai';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost } from '../../core/metering/prices.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  // One $0.025 budget bound to the sidecar: two searches' fees and their tokens, not three.
  rig = await startProxyRig({}, { budgetsUsd: [0.025] });
});
afterAll(async () => {
  await rig.close();
});

/** The tokens of the event, priced alone: what the call cost before its tools' fees. */
function tokensCost(model: string, tokens: { input: number; output: number }): number {
  return cost(rig.prices, model, { ...tokens, cachedInput: 0 }).costUsd;
}

describe('tools the provider runs and bills per use', () => {
  it("charges Anthropic's web searches at 10 USD per thousand, whole and streamed through the SDK", async () => {
    const request = {
      model: 'claude-3-5-haiku-20241022',
      max_tokens: 6,
      messages: [{ role: 'user' as const, content: 'What happened today?' }],
      tools: [{ type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses: 5 }],
    };
    const headers = { 'x-sim-web-searches': '3', 'x-sim-input-tokens': '500' };
    const whole = await anthropicClient(rig.agent, { ...headers, 'X-Request-Id': 'searches-whole' }).messages.create(
      request,
    );
    expect(whole.usage.server_tool_use?.web_search_requests).toBe(3);
    const stream = await anthropicClient(rig.agent, { ...headers, 'X-Request-Id': 'searches-stream' }).messages.create({
      ...request,
      stream: true,
    });
    for await (const event of stream) void event;
    for (const id of ['searches-whole', 'searches-stream']) {
      const event = await rig.usageEvent(id);
      expect(event.payload.hosted_tool_uses, id).toEqual({ web_search: 3 });
      expect(event.cost_usd, id).toBeCloseTo(tokensCost(request.model, event.tokens) + 0.03, 12);
    }
  });

  it("charges OpenAI's web searches at the fee of the tool the request declares, whole and streamed", async () => {
    const headers = { 'x-sim-web-searches': '2', 'x-sim-input-tokens': '300' };
    const request = { model: 'gpt-4.1-mini', input: 'What happened today?', max_output_tokens: 8 };
    const client = (id: string) => openAiClient(rig.agent, { ...headers, 'X-Request-Id': id });
    const whole = await client('search-ga').responses.create({ ...request, tools: [{ type: 'web_search' }] });
    expect(whole.output.filter((item) => item.type === 'web_search_call')).toHaveLength(2);
    const stream = await client('search-preview').responses.create({
      ...request,
      tools: [{ type: 'web_search_preview' }],
      stream: true,
    });
    for await (const event of stream) void event;
    for (const [id, uses, fee] of [
      ['search-ga', { web_search: 2 }, 0.01],
      ['search-preview', { web_search_preview: 2 }, 0.025],
    ] as const) {
      const event = await rig.usageEvent(id);
      expect(event.payload.hosted_tool_uses, id).toEqual(uses);
      expect(event.cost_usd, id).toBeCloseTo(tokensCost(request.model, event.tokens) + 2 * fee, 12);
    }
  });

  it('charges the images the image generation tool made by their quality and size, whole and streamed', async () => {
    const headers = { 'x-sim-images': 'low/1024x1024,high/1536x1024', 'x-sim-input-tokens': '200' };
    const request = {
      model: 'gpt-4.1-mini',
      input: 'Draw a cat, then a wide one',
      max_output_tokens: 8,
      tools: [{ type: 'image_generation' as const }],
    };
    const client = (id: string) => openAiClient(rig.agent, { ...headers, 'X-Request-Id': id });
    const whole = await client('images-whole').responses.create(request);
    expect(whole.output.filter((item) => item.type === 'image_generation_call')).toHaveLength(2);
    const stream = await client('images-stream').responses.create({ ...request, stream: true });
    for await (const event of stream) void event;
    for (const id of ['images-whole', 'images-stream']) {
      const event = await rig.usageEvent(id);
      expect(event.payload.hosted_tool_uses, id).toEqual({ image_low_1024: 1, image_high_1536: 1 });
      // gpt-image-1: 0.011 for a low 1024×1024 image, 0.25 for a high 1536×1024 one.
      expect(event.cost_usd, id).toBeCloseTo(tokensCost(request.model, event.tokens) + 0.011 + 0.25, 12);
    }
  });

  it('charges a prompt grounded with Google Search once, at 35 USD per thousand', async () => {
    const res = await fetch(`${rig.addresses.proxyUrl}/gemini/v1beta/models/gemini-2.0-flash:generateContent`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-goog-api-key': 'g-key',
        'x-request-id': 'grounded',
        'x-sim-web-searches': '4',
      },
      body: JSON.stringify({
        contents: [{ role: 'user', parts: [{ text: 'What happened today?' }] }],
        tools: [{ googleSearch: {} }],
        generationConfig: { maxOutputTokens: 6 },
      }),
    });
    expect(res.status).toBe(200);
    const event = await rig.usageEvent('grounded');
    expect(event.payload.hosted_tool_uses).toEqual({ google_search: 1 });
    expect(event.cost_usd).toBeCloseTo(tokensCost('gemini-2.0-flash', event.tokens) + 0.035, 12);
  });

  it('cuts a stream at the search that crosses the budget, before the answer it would have paid for', async () => {
    const budgetId = rig.boundBudgets[0] ?? '';
    const stream = await openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-search-cut',
      'X-Svc-Budget-Id': budgetId,
      'X-Request-Id': 'search-cut',
      'x-sim-web-searches': '3',
      'x-sim-input-tokens': '20',
    }).responses.create({
      model: 'gpt-4.1-nano',
      input: 'Search thrice',
      max_output_tokens: 8,
      tools: [{ type: 'web_search' }],
      stream: true,
    });
    const searches: string[] = [];
    let text = '';
    const error = await (async () => {
      try {
        for await (const event of stream) {
          if (event.type === 'response.output_item.added' && event.item.type === 'web_search_call')
            searches.push(event.item.id);
          if (event.type === 'response.output_text.delta') text += event.delta;
        }
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).message).toContain('SVC-BUD-3001');
    // Two searches fit in $0.025 with the tokens; the third crossed it and was not passed on.
    expect(searches).toEqual(['ws_sim_0', 'ws_sim_1']);
    expect(text).toBe('');
    const event = await rig.usageEvent('search-cut');
    expect(event.payload.hosted_tool_uses).toEqual({ web_search: 3 });
    expect(event.payload.cut_off).toBe('budget');
  });
});
