import type { PriceTable } from '../../../core/metering/prices.ts';
import type { LocalEnvelope } from '../../envelopes/index.ts';
import type { Operation, ParsedRequest } from '../../providers/index.ts';
import { price, worstCase } from '../call-pricing.ts';
import type { InputTokens } from '../input-tokens.ts';
import type { MadeOnRead } from '../policy-gate.ts';

/** What an LLM call's evaluation context is made of. */
export interface CallFacts {
  tenantId: string;
  /** The budget's workflow (`GovernanceDeps.workflows`). */
  workflow: unknown;
  prices: PriceTable;
  provider: string;
  op: Operation;
  parsed: ParsedRequest;
  input: InputTokens;
  host: string;
  envelope: Pick<LocalEnvelope, 'envelopeId' | 'executionId' | 'budgetId'>;
}

/** The context fields whose figures come from the exact input count: counted before a rule reads them. */
export const COUNTED_FIELDS = ['estimated_input_tokens', 'token_count', 'estimated_cost'] as const;

/**
 * The context `llm:<model>` is evaluated with: the proxy's own fields and the spec's checkable
 * ones it knows, with the meaning the control plane's evaluate gives them (`model_id`, the model;
 * `input_text`, the call's text; `token_count`, its input tokens; `estimated_cost`, the USD the
 * call reserves). The costly ones are `made` only when the ruleset reads them: the figures counted
 * exactly (the caller counts beforehand when the ruleset reads one), the text put together from
 * the request.
 */
export function llmCallContext(facts: CallFacts): { context: Record<string, unknown>; made: MadeOnRead } {
  const { parsed, envelope, input } = facts;
  const context: Record<string, unknown> = {
    model: parsed.model,
    model_name: parsed.model,
    model_id: parsed.model,
    provider: facts.provider,
    adapter_type: facts.provider,
    tenant_id: facts.tenantId,
    workflow_id: facts.workflow,
    operation: facts.op,
    stream: parsed.stream,
    host: facts.host,
    envelope_id: envelope.envelopeId,
    execution_id: envelope.executionId,
    budget_id: envelope.budgetId,
    max_output_tokens: parsed.maxOutputTokens,
    declared_tools: parsed.declaredTools,
  };
  const made: MadeOnRead = {
    estimated_input_tokens: () => input.within(),
    token_count: () => input.within(),
    // What the call reserves: its worst case at the tier it asks for.
    estimated_cost: () => {
      const counted = { ...parsed, estimatedInputTokens: input.within() };
      return price(facts.prices, parsed.model, worstCase(counted), facts.provider, parsed.serviceTier).usd;
    },
    input_text: () => input.text(),
  };
  return { context, made };
}
