import type { PriceTable } from '../../core/metering/prices.ts';
import { covers, type BudgetLease, type LeaseRefusal, type Reservation } from '../enforcement/index.ts';
import type { ParsedRequest } from '../providers/index.ts';
import { estimate } from './call-pricing.ts';
import type { InputTokens } from './input-tokens.ts';

/** The request as parsed, with its exact input token count. */
export async function exactly(parsed: ParsedRequest, input: InputTokens): Promise<ParsedRequest> {
  return { ...parsed, estimatedInputTokens: await input.exact() };
}

/**
 * Reserves a call from its budget lease. `parsed` carries the input tokens' upper bound: when the
 * lease holds even the bounded worst case, the bound decides alone, since the exact count could
 * only lower it. Near the limit, where the bound could turn the decision or the size of the hold,
 * the request is counted exactly and the exact figures decide, as if the bound had never been.
 */
export async function reserveCall(
  lease: Pick<BudgetLease, 'available' | 'reserve'>,
  prices: PriceTable,
  parsed: ParsedRequest,
  input: InputTokens,
  provider: string,
): Promise<Reservation | LeaseRefusal> {
  let { most, least } = estimate(prices, parsed, provider);
  // The lease decides again when reserving, so what other calls took while this one was being
  // counted is seen.
  if (!covers(lease.available(), most)) ({ most, least } = estimate(prices, await exactly(parsed, input), provider));
  return lease.reserve(most, least);
}
