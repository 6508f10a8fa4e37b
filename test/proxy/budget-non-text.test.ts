import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { eventually } from '../harness/control-plane.ts';
import { viaForwardProxy } from '../proxy-net/harness.ts';
import { IMAGE_TOKENS } from '../../proxy/providers/non-text-input.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

const LIMIT_USD = 0.05;
const PARALLEL = 20;
const SERVER_CONTEXT_TOKENS = 128_000;
/** What a model missing from the price table costs here, USD per million tokens in and out. */
const UNLISTED_USD_PER_MILLION = 1;

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig(
    {
      proxy_soft_limit_usd: 0,
      proxy_soft_limit_tokens: 0,
      proxy_lease_usd: LIMIT_USD,
      unknown_model_price: `fixed:${UNLISTED_USD_PER_MILLION}:${UNLISTED_USD_PER_MILLION}`,
    },
    { budgetsUsd: [LIMIT_USD, LIMIT_USD, LIMIT_USD, LIMIT_USD] },
  );
});
afterAll(async () => {
  await rig.close();
});

async function spentUsd(budgetId: string): Promise<number> {
  const res = await rig.admin('GET', `/v1/budgets/${budgetId}/status`);
  const body = res.body as { status?: { current_spend?: { total_cost_usd?: number } } };
  return body.status?.current_spend?.total_cost_usd ?? Number.NaN;
}

describe('parallel calls that attach files', () => {
  it('keep the recorded spend within L + N × E: a file of unknown size is held at the server-context allowance', async () => {
    const budgetId = rig.boundBudgets[0] as string;
    // Each call reads a file the provider bills 100,000 input tokens for, and asks for 8 tokens.
    const call = async (i: number, inputTokens: number): Promise<boolean> => {
      const client = openAiClient(rig.agent, {
        'x-request-id': `file-${i}`,
        'X-Svc-Budget-Id': budgetId,
        'X-Svc-Execution-Id': 'exec-files',
        'x-sim-input-tokens': String(inputTokens),
        'x-sim-output-tokens': '8',
        'x-sim-first-byte-delay-ms': '800',
      });
      try {
        await client.chat.completions.create({
          model: 'gpt-4o',
          max_completion_tokens: 8,
          messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-bigpdf' } }] }],
        });
        return true;
      } catch {
        return false;
      }
    };
    // A small call first, so the proxy holds its lease when the others arrive together.
    await call(-1, 10);
    const served = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => call(i, 100_000)));
    const admitted = served.filter(Boolean).length;
    for (const [i, ok] of served.entries()) if (ok) await rig.usageEvent(`file-${i}`);

    // E: one call's estimate, the file at the allowance plus a margin for the framing, 8 tokens out.
    const prices = loadPriceTable();
    const oneCall = cost(prices, 'gpt-4o', { input: SERVER_CONTEXT_TOKENS + 1_000, output: 8, cachedInput: 0 }).costUsd;
    const billed = cost(prices, 'gpt-4o', { input: 100_000, output: 8, cachedInput: 0 }).costUsd;
    const applied = await eventually(
      () => spentUsd(budgetId),
      (usd) => usd >= admitted * billed,
      10_000,
    );
    expect(applied).toBeLessThanOrEqual(LIMIT_USD + oneCall);
    expect(admitted).toBeLessThanOrEqual(1);
  });
});

/** The USD an unlisted model's call of so many tokens costs. */
const unlistedUsd = (tokens: number): number => (tokens * UNLISTED_USD_PER_MILLION) / 1_000_000;

/**
 * Sends one call of an input shape the proxy bounds, then `PARALLEL` at once (the proxy holds its
 * lease when they arrive), each of which the provider bills `billed` input tokens, to a model
 * missing from the price table; answers how many were served and how much the budget recorded
 * once it has applied each served call's charge, at least `chargedUsd`.
 */
async function inParallel(
  budget: number,
  target: string,
  body: object,
  billed: number,
  chargedUsd: number,
): Promise<{ served: number; recordedUsd: number }> {
  const budgetId = rig.boundBudgets[budget] as string;
  const port = Number(new URL(rig.addresses.proxyUrl).port);
  const send = async (i: number): Promise<boolean> => {
    const res = await viaForwardProxy(
      port,
      target,
      {
        'content-type': 'application/json',
        authorization: 'Bearer sk-test',
        'x-request-id': `shape-${budget}-${i}`,
        'X-Svc-Budget-Id': budgetId,
        'X-Svc-Execution-Id': `exec-shape-${budget}`,
        'x-sim-input-tokens': String(billed),
        'x-sim-output-tokens': '8',
        'x-sim-first-byte-delay-ms': '800',
      },
      JSON.stringify(body),
    );
    return res.status === 200;
  };
  const first = await send(-1);
  const rest = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => send(i)));
  const served = [first, ...rest].filter(Boolean).length;
  for (const [i, ok] of rest.entries()) if (ok) await rig.usageEvent(`shape-${budget}-${i}`);
  // The control plane applies the charges after the proxy publishes them; a micro-dollar of rounding each.
  const recordedUsd = await eventually(
    () => spentUsd(budgetId),
    (usd) => usd >= served * (chargedUsd - 1e-6),
    10_000,
  );
  return { served, recordedUsd };
}

describe('parallel calls whose input is not text, to embeddings and legacy completions', () => {
  // E: one call's estimate, the input's bound plus a margin for text and framing, 8 tokens out.
  const oneCall = unlistedUsd(IMAGE_TOKENS.openai + 1_000 + 8);
  // Each call the provider bills 10,000 input tokens: 20 of them are four times the budget.
  const billed = 10_000;

  it('an image to embed with Gemini is held at the image bound: the calls the provider bills stay within L + E', async () => {
    const png = 'iVBORw0KGgo'.repeat(30_000);
    const { served, recordedUsd } = await inParallel(
      1,
      'http://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-2:embedContent',
      { content: { parts: [{ text: 'a beach' }, { inline_data: { mime_type: 'image/png', data: png } }] } },
      billed,
      unlistedUsd(IMAGE_TOKENS.gemini),
    );
    expect(served).toBeGreaterThanOrEqual(1);
    // Gemini answers embeddings without usage: each is charged its estimate, above what it bills.
    expect(served * unlistedUsd(billed)).toBeLessThanOrEqual(LIMIT_USD + oneCall);
    expect(recordedUsd).toBeGreaterThanOrEqual(served * (unlistedUsd(IMAGE_TOKENS.gemini) - 1e-6));
    expect(recordedUsd).toBeLessThanOrEqual(LIMIT_USD + oneCall);
  });

  it("vLLM's chat-form embeddings of an image are served and held at the image bound", async () => {
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,' + 'iVBORw0KGgo'.repeat(30_000) } };
    const { served, recordedUsd } = await inParallel(
      2,
      'http://compat.local:8000/v1/embeddings',
      { model: 'vlm2vec', messages: [{ role: 'user', content: [image, { type: 'text', text: 'a beach' }] }] },
      billed,
      unlistedUsd(billed),
    );
    expect(served).toBeGreaterThanOrEqual(1);
    expect(served * unlistedUsd(billed)).toBeLessThanOrEqual(LIMIT_USD + oneCall);
    expect(recordedUsd).toBeLessThanOrEqual(LIMIT_USD + oneCall);
  });

  it("vLLM's prompt embeddings to a legacy completion are held at their bytes", async () => {
    const { served, recordedUsd } = await inParallel(
      3,
      'http://compat.local:8000/v1/completions',
      { model: 'llama-3-8b', prompt_embeds: 'A'.repeat(IMAGE_TOKENS.openai), max_tokens: 8 },
      billed,
      unlistedUsd(billed),
    );
    expect(served).toBeGreaterThanOrEqual(1);
    expect(served * unlistedUsd(billed)).toBeLessThanOrEqual(LIMIT_USD + oneCall);
    expect(recordedUsd).toBeLessThanOrEqual(LIMIT_USD + oneCall);
  });
});
