import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

const LIMIT_USD = 0.05;
const PARALLEL = 20;
const SERVER_CONTEXT_TOKENS = 128_000;

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig(
    { proxy_soft_limit_usd: 0, proxy_soft_limit_tokens: 0, proxy_lease_usd: LIMIT_USD },
    { budgetsUsd: [LIMIT_USD] },
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
