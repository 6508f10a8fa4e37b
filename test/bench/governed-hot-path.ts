/**
 * The proxy's governed hot path per call, without the network, with the proxy's own steps: parse
 * the request with the input tokens' byte bound (`parseBounded`), evaluate `llm:<model>` with the
 * proxy's own context (`llmCallContext`) against the local ruleset, reserve from the budget lease (`reserveCall`: the bound decides while the
 * lease holds it, as it does far from the limit), price the answer's usage and settle. Prints
 * latency percentiles and throughput, then each stage alone, among them the exact tiktoken count
 * the proxy makes only near the limit or for a policy on `estimated_input_tokens`.
 *
 *   node test/bench/governed-hot-path.ts [calls=100000] [policies=100]
 */
import { createBuiltinJudge } from '../../core/brain/index.ts';
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import type { RequestReply } from '../../core/bus/bus.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { compileRuleset, type Policy } from '../../core/policy/index.ts';
import type { LeaseRequest } from '../../core/sync/contract.ts';
import { BudgetLease, isRefusal } from '../../proxy/enforcement/index.ts';
import {
  estimate,
  llmCallContext,
  parseBounded,
  price,
  PolicyGate,
  reserveCall,
} from '../../proxy/governance/index.ts';
import { createGovernanceMetrics } from '../../proxy/metrics/index.ts';
import { createAdapterDeps, createOpenAiAdapter } from '../../proxy/providers/index.ts';

const calls = Number(process.argv[2] ?? 100_000);
const policyCount = Number(process.argv[3] ?? 100);
const now = new Date().toISOString();
const policies: Policy[] = Array.from({ length: policyCount }, (_, i) => ({
  policy_id: randomUUID(),
  tenant_id: 'bench',
  name: `p${i}`,
  description: '',
  priority: 1 + (i % 1000),
  status: 'ACTIVE',
  enforcement: 'BLOCK',
  rules: [
    { rule_id: 'a', name: 'tool', action: `tool:tool_${i}`, decision: 'DENY', conditions: [] },
    {
      rule_id: 'b',
      name: 'model',
      action: i % 2 === 0 ? `llm:model-${i}*` : 'llm:*',
      decision: i % 2 === 0 ? 'DENY' : 'WARN',
      conditions: [{ field: 'max_output_tokens', operator: 'gt', value: 100_000 }],
    },
  ],
  tags: {},
  version: 1,
  created_at: now,
  updated_at: now,
}));

const prices = loadPriceTable();
const tokens = createTokenCounter();
const adapter = createOpenAiAdapter(createAdapterDeps(tokens, prices));
const listedModels = new Set(prices.keys);
const metrics = createGovernanceMetrics(new Registry(), 50, (model) => listedModels.has(model));
const gate = new PolicyGate(
  { current: compileRuleset(policies, 1) },
  'closed',
  metrics,
  createBuiltinJudge({ maxTextChars: 65_536, allowedHosts: [] }),
);
/** Answers every lease request with a large slice at once, as an idle control plane would. */
const requests: RequestReply = {
  request: (_subject, data) =>
    Promise.resolve({
      lease_id: 'bench',
      budget_id: (data as LeaseRequest).budget_id,
      tokens: null,
      micros: 1e12,
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      status: 'active',
    }),
  reply: () => Promise.reject(new Error('unused')),
};
const lease = new BudgetLease(
  'bench-budget',
  {
    tenantId: 'bench',
    holder: 'bench',
    want: { tokens: 1e9, pico: 1e18 },
    softLimit: { tokens: 0, pico: 0 },
    renewBelow: 0.5,
    timeoutMs: 1000,
  },
  requests,
  {
    outcome: () => undefined,
    warn: () => undefined,
  },
);
await lease.renew();

const prompts = Array.from({ length: 64 }, (_, i) => ({
  model: 'gpt-4o-mini',
  max_tokens: 256,
  messages: [
    { role: 'system', content: 'You are a careful assistant that answers briefly.' },
    {
      role: 'user',
      content: `Question ${i}: ${'summarise the quarterly figures and list the three largest changes '.repeat(4)}`,
    },
  ],
}));

const PATH = '/v1/chat/completions';
const envelope = { envelopeId: randomUUID(), executionId: randomUUID(), budgetId: 'bench-budget' };
const contextOf = (parsed: ReturnType<typeof parseBounded>) =>
  llmCallContext({
    tenantId: 'bench',
    workflow: undefined,
    prices,
    provider: adapter.id,
    op: 'chat',
    ...parsed,
    host: 'api.openai.com',
    envelope,
  });
const usage = { input: 90, output: 200, cachedInput: 0 };

async function governedCall(i: number): Promise<void> {
  const read = parseBounded(tokens, adapter, 'chat', prompts[i % prompts.length], PATH);
  const { parsed, input } = read;
  const { context, made } = contextOf(read);
  const verdict = gate.check(`llm:${parsed.model}`, context, made);
  if (!verdict.allowed) throw new Error('bench ruleset must allow the call');
  const reservation = await reserveCall(lease, prices, parsed, input, adapter.id);
  if (isRefusal(reservation)) throw new Error('bench lease must cover the call');
  if (input.known() !== undefined) throw new Error('far from the limit the bound decides: nothing is counted');
  reservation.settle(price(prices, parsed.model, usage));
}

for (let i = 0; i < 2000; i++) await governedCall(i);
const samples = new Float64Array(calls);
const started = process.hrtime.bigint();
for (let i = 0; i < calls; i++) {
  const t0 = process.hrtime.bigint();
  await governedCall(i);
  samples[i] = Number(process.hrtime.bigint() - t0) / 1000;
}
const totalMs = Number(process.hrtime.bigint() - started) / 1e6;
samples.sort();
const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]?.toFixed(1);
console.log(
  `governed hot path: ${calls} calls, ${policyCount} policies (${policyCount * 2} rules), node ${process.version}`,
);
console.log(`  p50 ${at(0.5)} µs   p90 ${at(0.9)} µs   p99 ${at(0.99)} µs   p99.9 ${at(0.999)} µs   max ${at(1)} µs`);
console.log(`  throughput ${Math.round(calls / (totalMs / 1000)).toLocaleString('en')} calls/s on one core`);
/** Mean time of one stage alone, so the total can be read. */
async function stage(name: string, run: (i: number) => unknown): Promise<void> {
  const n = Math.min(calls, 50_000);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await run(i);
  console.log(`  ${name.padEnd(52)} ${(Number(process.hrtime.bigint() - t0) / 1000 / n).toFixed(2)} µs mean`);
}
const first = parseBounded(tokens, adapter, 'chat', prompts[0], PATH);
const { parsed } = first;
await stage('parse with the byte bound (330-char prompt)', (i) =>
  parseBounded(tokens, adapter, 'chat', prompts[i % prompts.length], PATH),
);
await stage('exact count with tiktoken (near the limit only)', (i) =>
  parseBounded(tokens, adapter, 'chat', prompts[i % prompts.length], PATH).input.exact(),
);
await stage('policy evaluation (llm:<model>, its context built)', () => {
  const { context, made } = contextOf(first);
  return gate.check('llm:gpt-4o-mini', context, made);
});
await stage('lease reserve + price + settle', () => {
  const r = lease.reserve(estimate(prices, parsed).most, { tokens: 1, pico: 1 });
  if (!isRefusal(r)) r.settle(price(prices, parsed.model, usage));
});
await lease.release();
tokens.free();
