import { describe, expect, it, vi } from 'vitest';
import type { RequestReply } from '../../core/bus/bus.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import type { LeaseRequest } from '../../core/sync/contract.ts';
import { BudgetLease, isRefusal, type Reservation } from '../enforcement/index.ts';
import type { ParsedRequest } from '../providers/index.ts';
import { estimate } from './call-pricing.ts';
import { InputTokens } from './input-tokens.ts';
import { reserveCall } from './reserve-call.ts';

const prices = loadPriceTable();
const PICO = 1_000_000;
/** Parsed with the bound: 4,000 bytes of prompt that tiktoken counts as 1,000 tokens. */
const bounded: ParsedRequest = {
  model: 'gpt-4o-mini',
  stream: false,
  estimatedInputTokens: 4000,
  maxOutputTokens: 10,
  declaredTools: [],
  builtinTools: [],
};
const exact = { ...bounded, estimatedInputTokens: 1000 };

/** A lease granted `pico` (rounded down to whole micro-dollars), tokens unlimited. */
async function leaseOf(pico: number): Promise<BudgetLease> {
  const requests: RequestReply = {
    request: (_subject, data) =>
      Promise.resolve({
        lease_id: 'L',
        budget_id: (data as LeaseRequest).budget_id,
        tokens: null,
        micros: Math.floor(pico / PICO),
        expires_at: new Date(Date.now() + 60_000).toISOString(),
        status: 'active',
      }),
    reply: () => Promise.reject(new Error('not used')),
  };
  const lease = new BudgetLease(
    'b',
    {
      tenantId: 't',
      holder: 'h',
      want: { tokens: 1e9, pico },
      softLimit: { tokens: 0, pico: 0 },
      renewBelow: 0,
      timeoutMs: 1000,
    },
    requests,
    { outcome: () => undefined, warn: () => undefined },
  );
  await lease.renew();
  return lease;
}

function input(): { tokens: InputTokens; count: ReturnType<typeof vi.fn> } {
  const count = vi.fn(() => 1000);
  return { tokens: new InputTokens(4000, count, createTokenCounter()), count };
}

describe('reserving a call with the input tokens bound', () => {
  const boundMost = estimate(prices, bounded, 'openai').most;
  const exactMost = estimate(prices, exact, 'openai').most;
  const exactLeast = estimate(prices, exact, 'openai').least;

  it('far from the limit: the bound decides and is held, nothing is tokenized', async () => {
    const lease = await leaseOf(1000 * boundMost.pico);
    const { tokens, count } = input();
    const held = (await reserveCall(lease, prices, bounded, tokens, 'openai')) as Reservation;
    expect(isRefusal(held)).toBe(false);
    expect(held.held).toEqual(boundMost);
    expect(count).not.toHaveBeenCalled();
  });

  it('near the limit: a call the bound would refuse is counted exactly and allowed, holding the exact worst case', async () => {
    // Covers the exact worst case, not the bound's.
    const lease = await leaseOf(Math.ceil((exactMost.pico + boundMost.pico) / 2 / PICO) * PICO);
    expect(lease.available().pico!).toBeLessThan(boundMost.pico);
    const { tokens, count } = input();
    const held = (await reserveCall(lease, prices, bounded, tokens, 'openai')) as Reservation;
    expect(isRefusal(held)).toBe(false);
    expect(held.held).toEqual(exactMost);
    expect(count).toHaveBeenCalledTimes(1);
  });

  it('below the exact minimum: refused as the exact count refuses', async () => {
    const lease = await leaseOf(Math.floor(exactLeast.pico / 2 / PICO) * PICO);
    const { tokens } = input();
    const refusal = await reserveCall(lease, prices, bounded, tokens, 'openai');
    expect(isRefusal(refusal)).toBe(true);
    expect(isRefusal(lease.reserve(exactMost, exactLeast))).toBe(true);
  });

  it('holds a call that asks for the priority tier at its priority rates', async () => {
    // GPT-4o mini at priority: 0.25 and 1 per million against 0.15 and 0.6.
    const priority: ParsedRequest = { ...bounded, serviceTier: 'priority' };
    const lease = await leaseOf(1e12);
    const { tokens } = input();
    const held = (await reserveCall(lease, prices, priority, tokens, 'openai')) as Reservation;
    expect(held.held).toEqual({ tokens: 4010, pico: 4000 * 250_000 + 10 * 1_000_000 });
    expect(held.held.pico).toBeGreaterThan(boundMost.pico);
  });

  it('holds the fees of the hosted-tool uses the request allows, and bills none to the least it may cost', async () => {
    // Three searches at 10 USD per thousand, one code interpreter container at 0.03.
    const searching: ParsedRequest = { ...bounded, hostedUses: { web_search: 3, code_interpreter: 1 } };
    const lease = await leaseOf(1e12);
    const { tokens } = input();
    const held = (await reserveCall(lease, prices, searching, tokens, 'openai')) as Reservation;
    expect(held.held).toEqual({ tokens: 4010, pico: boundMost.pico + 3 * 10_000_000_000 + 30_000_000_000 });
    expect(estimate(prices, searching, 'openai').least).toEqual(estimate(prices, bounded, 'openai').least);
  });

  it('holds a prompt marked for caching at the write rate of how long it is to be kept', async () => {
    // Claude Sonnet 4: input 3, writes kept five minutes 3.75, kept the hour 6, output 15 per million.
    const claude: ParsedRequest = { ...exact, model: 'claude-sonnet-4' };
    const lease = await leaseOf(1e12);
    const held = async (parsed: ParsedRequest) =>
      ((await reserveCall(lease, prices, parsed, input().tokens, 'anthropic')) as Reservation).held.pico;
    expect(await held(claude)).toBe(1000 * 3_000_000 + 10 * 15_000_000);
    expect(await held({ ...claude, promptCaching: 'short' })).toBe(1000 * 3_750_000 + 10 * 15_000_000);
    expect(await held({ ...claude, promptCaching: 'long' })).toBe(1000 * 6_000_000 + 10 * 15_000_000);
  });
});
