import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { createBuiltinJudge } from '../../../core/brain/index.ts';
import { compileRuleset, type CompiledRuleset } from '../../../core/policy/index.ts';
import { activePolicy } from '../../../test/fixtures/policies.ts';
import { createGovernanceMetrics } from '../../metrics/index.ts';
import { loadPriceTable } from '../../../core/metering/prices.ts';
import { createTokenCounter } from '../../../core/metering/tokens.ts';
import {
  createAdapterDeps,
  createAnthropicAdapter,
  createGeminiAdapter,
  createOpenAiAdapter,
  type Operation,
  type ProviderAdapter,
} from '../../providers/index.ts';
import { price, worstCase } from '../call-pricing.ts';
import { parseBounded } from '../input-tokens.ts';
import { PolicyGate } from '../policy-gate.ts';
import { toolContext } from '../tool-calls.ts';
import { llmCallContext } from './call-context.ts';

const tokens = createTokenCounter();
const prices = loadPriceTable();
const deps = createAdapterDeps(tokens, prices);
afterAll(() => tokens.free());

/** The spec's checkable context fields (spec 2.6). */
const SPEC_FIELDS = [
  'tenant_id',
  'workflow_id',
  'tool_name',
  'model_id',
  'input_text',
  'estimated_cost',
  'token_count',
  'user_id',
  'adapter_type',
];

const envelope = { envelopeId: 'env-1', executionId: 'exec-1', budgetId: 'budget-1' };

/** A ruleset reading every spec field, so the gate makes each the proxy can make. */
const readingAll = compileRuleset(
  [
    activePolicy([
      {
        rule_id: 'r',
        name: 'r',
        action: '*',
        decision: 'DENY',
        conditions: SPEC_FIELDS.map((field) => ({ field, operator: 'eq' as const, value: '-' })),
      },
    ]),
  ],
  1,
);
const metrics = createGovernanceMetrics(new Registry(), 10, () => false);
const judge = createBuiltinJudge({ maxTextChars: 1024, allowedHosts: [] });

/** The context `llm:<model>` is evaluated with under `ruleset`. */
function contextOf(adapter: ProviderAdapter, op: Operation, body: unknown, path: string, ruleset = readingAll) {
  const read = parseBounded(tokens, adapter, op, body, path);
  const { context, made } = llmCallContext({
    tenantId: 'acme',
    workflow: 'billing',
    prices,
    provider: adapter.id,
    op,
    ...read,
    host: 'h',
    envelope,
  });
  new PolicyGate({ current: ruleset }, 'closed', metrics, judge).check(`llm:${read.parsed.model}`, context, made);
  return { read, context };
}

describe('the spec fields of an LLM call', () => {
  it('carries every one the proxy knows, as the control plane reads them', async () => {
    const adapter = createOpenAiAdapter(deps);
    const { read, context } = contextOf(
      adapter,
      'chat',
      {
        model: 'gpt-4o-mini',
        max_tokens: 10,
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: [{ type: 'text', text: 'list the files' }] },
          { role: 'assistant', tool_calls: [{ function: { name: 'ls', arguments: '{"dir":"/"}' } }] },
          { role: 'tool', tool_call_id: 'c1', content: 'etc home' },
        ],
      },
      '/v1/chat/completions',
    );
    const exact = await read.input.exact();
    expect(context.tenant_id).toBe('acme');
    expect(context.model_id).toBe('gpt-4o-mini');
    expect(context.adapter_type).toBe('openai');
    expect(context.token_count).toBe(exact);
    const cost = price(prices, 'gpt-4o-mini', worstCase({ ...read.parsed, estimatedInputTokens: exact }), 'openai');
    expect(context.estimated_cost).toBe(cost.usd);
    expect(context.estimated_cost).toBeGreaterThan(0);
    expect(String(context.input_text).split('\n')).toEqual(['be brief', 'list the files', 'ls{"dir":"/"}', 'etc home']);
    // The budget's workflow, as envelope creation reads it at the control plane.
    expect(context.workflow_id).toBe('billing');
    // Not known to the proxy: left absent, so a rule on it does not match here.
    expect(context.user_id).toBeUndefined();
  });

  it('reads the instructions and input of a Responses call', () => {
    const { context } = contextOf(
      createOpenAiAdapter(deps),
      'responses',
      {
        model: 'gpt-4o',
        instructions: 'answer in French',
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'weather?' }] },
          { type: 'function_call_output', call_id: 'c', output: 'rain' },
        ],
      },
      '/v1/responses',
    );
    expect(String(context.input_text).split('\n')).toEqual(['answer in French', 'weather?', 'rain']);
  });

  it('reads an Anthropic system prompt and tool result', () => {
    const { context } = contextOf(
      createAnthropicAdapter(deps),
      'messages',
      {
        model: 'claude-3-5-haiku-20241022',
        max_tokens: 10,
        system: [{ type: 'text', text: 'you are terse' }],
        messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'disk full' }] }],
      },
      '/v1/messages',
    );
    expect(context.adapter_type).toBe('anthropic');
    expect(String(context.input_text).split('\n')).toEqual(['you are terse', 'disk full']);
  });

  it('reads a Gemini system instruction, contents and function results', () => {
    const { context } = contextOf(
      createGeminiAdapter(deps),
      'generate',
      {
        systemInstruction: { parts: [{ text: 'be kind' }] },
        contents: [
          { role: 'user', parts: [{ text: 'status?' }] },
          { role: 'model', parts: [{ functionCall: { name: 'probe', args: { host: 'db' } } }] },
          { role: 'user', parts: [{ functionResponse: { name: 'probe', response: { up: false } } }] },
        ],
      },
      '/v1beta/models/gemini-2.0-flash:generateContent',
    );
    expect(context.model_id).toBe('gemini-2.0-flash');
    expect(String(context.input_text).split('\n')).toEqual([
      'be kind',
      'status?',
      'probe{"host":"db"}',
      'probe{"up":false}',
    ]);
  });

  it('makes the costly fields only for a ruleset that reads them', () => {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
    const none = compileRuleset(
      [activePolicy([{ rule_id: 'r', name: 'r', action: 'llm:*', decision: 'WARN', conditions: [] }])],
      1,
    );
    const { context } = contextOf(createOpenAiAdapter(deps), 'chat', body, '/v1/chat/completions', none);
    for (const field of ['input_text', 'token_count', 'estimated_cost', 'estimated_input_tokens'])
      expect(context).not.toHaveProperty(field);
    expect(context.model_id).toBe('gpt-4o-mini');
  });
});

describe('the text of an LLM call', () => {
  const body = { model: 'gpt-4o-2024-08-06', messages: [{ role: 'user', content: 'the secret is 42' }] };
  const adapter = createOpenAiAdapter(deps);
  const readingText = (action: string) =>
    compileRuleset(
      [
        activePolicy([
          {
            rule_id: 'r',
            name: 'r',
            action,
            decision: 'DENY',
            conditions: [{ field: 'input_text', operator: 'contains', value: 'secret' }],
          },
        ]),
      ],
      1,
    );

  /** The verdict on the call under `ruleset`, and how often its text was put together. */
  function judged(ruleset: CompiledRuleset) {
    const read = parseBounded(tokens, adapter, 'chat', body, '/v1/chat/completions');
    const { context, made } = llmCallContext({
      tenantId: 'acme',
      workflow: undefined,
      prices,
      provider: 'openai',
      op: 'chat',
      ...read,
      host: 'h',
      envelope,
    });
    let built = 0;
    const counted = {
      ...made,
      input_text: () => {
        built++;
        return made.input_text?.();
      },
    };
    const gate = new PolicyGate({ current: ruleset }, 'closed', metrics, judge);
    const action = `llm:${read.parsed.model}`;
    const verdict = gate.check(action, context, counted);
    return { verdict, context, built, reads: gate.reads(action, 'input_text') };
  }

  it('is not put together when only rules no LLM call meets read it', () => {
    for (const action of ['tool:shell', 'tool:*', 'network:connect', 'llm-proxy:*']) {
      const { verdict, context, built, reads } = judged(readingText(action));
      expect(reads, action).toBe(false);
      expect(built, action).toBe(0);
      expect(context, action).not.toHaveProperty('input_text');
      expect(verdict.allowed, action).toBe(true);
    }
  });

  it('is put together and judged when a rule an LLM call may meet reads it', () => {
    // Under its own name, its type, any action, or its model's family name (a deny on gpt-4o
    // holds on gpt-4o-2024-08-06).
    for (const action of ['llm:gpt-4o-2024-08-06', 'llm:*', '*', 'LLM:GPT-*', '*:gpt-4o-2024-08-06', 'llm:gpt-4o']) {
      const { verdict, built, reads } = judged(readingText(action));
      expect(reads, action).toBe(true);
      expect(built, action).toBe(1);
      expect(verdict, action).toMatchObject({ allowed: false, result: { matched_rule: 'r' } });
    }
  });
});

describe('the spec fields of a tool call', () => {
  it('carries its name and its arguments as input_text, beside the fields of the call it came from', () => {
    const { context } = contextOf(
      createOpenAiAdapter(deps),
      'chat',
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'clean up' }] },
      '/v1/chat/completions',
    );
    const read = toolContext({ name: 'shell', arguments: '{"cmd":"rm \\u002drf /"}' }, 'model', context);
    expect('judged' in read).toBe(true);
    if (!('judged' in read)) return;
    expect(read.judged).toMatchObject({
      tenant_id: 'acme',
      model_id: 'gpt-4o-mini',
      adapter_type: 'openai',
      tool_name: 'shell',
      input_text: '{"cmd":"rm -rf /"}',
    });
  });
});
