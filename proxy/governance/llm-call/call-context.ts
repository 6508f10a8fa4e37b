import type { LocalEnvelope } from '../../envelopes/index.ts';
import type { Operation, ParsedRequest } from '../../providers/index.ts';
import type { InputTokens } from '../input-tokens.ts';

/** What an LLM call's evaluation context is made of. */
export interface CallFacts {
  provider: string;
  op: Operation;
  parsed: ParsedRequest;
  input: InputTokens;
  host: string;
  envelope: Pick<LocalEnvelope, 'envelopeId' | 'executionId' | 'budgetId'>;
}

/**
 * The context `llm:<model>` is evaluated with. `estimated_input_tokens` is read when a rule reads
 * it, counted exactly only then (the caller counts it beforehand when the ruleset reads it).
 */
export function llmCallContext(facts: CallFacts): Record<string, unknown> {
  const { parsed, envelope, input } = facts;
  const context: Record<string, unknown> = {
    model: parsed.model,
    model_name: parsed.model,
    provider: facts.provider,
    operation: facts.op,
    stream: parsed.stream,
    host: facts.host,
    envelope_id: envelope.envelopeId,
    execution_id: envelope.executionId,
    budget_id: envelope.budgetId,
    max_output_tokens: parsed.maxOutputTokens,
    declared_tools: parsed.declaredTools,
  };
  Object.defineProperty(context, 'estimated_input_tokens', { enumerable: true, get: () => input.within() });
  return context;
}
