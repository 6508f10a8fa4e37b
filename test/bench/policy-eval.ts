/**
 * Policy evaluation benchmark: compiles a realistic ruleset and evaluates it in a loop,
 * printing latency percentiles and throughput.
 *
 *   node test/bench/policy-eval.ts [evaluations=200000] [policies=200]
 */
import { compileRuleset, evaluate } from '../../core/policy/engine.ts';
import type { Policy, PolicyCondition, PolicyRule } from '../../core/policy/model.ts';

/** Deterministic generator (mulberry32) so every run measures the same ruleset. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ACTIONS = [
  'tool:*',
  'tool:shell',
  'tool:fs:*',
  'llm:gpt-4*',
  'llm:claude-*',
  'execution:start',
  '*',
  'tool:*:write',
];
const MODELS = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4', 'claude-haiku-4', 'gemini-2.5-pro', 'llama-3.1-70b'];
const TOOLS = ['search', 'calculator', 'shell', 'fs_write', 'http_get', 'sql_query', 'email_send', 'browser'];
const ROLES = ['admin', 'developer', 'analyst', 'viewer', 'service'];
const DECISIONS: PolicyRule['decision'][] = ['DENY', 'DENY', 'DENY', 'WARN', 'ALLOW', 'REQUIRE_APPROVAL'];
const ENFORCEMENTS: Policy['enforcement'][] = ['BLOCK', 'BLOCK', 'BLOCK', 'BLOCK', 'TERMINATE', 'WARN', 'AUDIT'];
const PATTERNS = [
  String.raw`(?i)\bdrop\s+table\b`,
  String.raw`\b\d{3}-\d{2}-\d{4}\b`,
  String.raw`(?i)api[_-]?key\s*[:=]`,
  '(a+)+$',
  String.raw`^SELECT .* FROM \w+`,
];

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function condition(random: () => number): PolicyCondition {
  switch (Math.floor(random() * 8)) {
    case 0:
      return { field: 'tool_name', operator: 'eq', value: pick(random, TOOLS) };
    case 1:
      return { field: 'request.model', operator: 'in', value: [pick(random, MODELS), pick(random, MODELS)] };
    case 2:
      return { field: 'estimated_cost', operator: 'gt', value: Math.round(random() * 500) / 100 };
    case 3:
      return { field: 'budget.percent_used', operator: 'gte', value: 50 + Math.floor(random() * 50) };
    case 4:
      return { field: 'input_text', operator: 'matches', value: pick(random, PATTERNS) };
    case 5:
      return {
        field: 'input_text',
        operator: 'contains',
        value: pick(random, ['password', 'rm -rf', 'BEGIN PRIVATE KEY', 'ssn']),
      };
    case 6:
      return { field: 'user_roles', operator: 'not_in', value: [pick(random, ROLES)] };
    default:
      return { field: 'token_count', operator: 'lt', value: 100 + Math.floor(random() * 8000) };
  }
}

function buildPolicies(count: number, random: () => number): Policy[] {
  return Array.from({ length: count }, (_, i): Policy => ({
    policy_id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    tenant_id: 'bench-tenant',
    name: `policy-${i}`,
    description: '',
    priority: 1 + Math.floor(random() * 1000),
    status: 'ACTIVE',
    enforcement: pick(random, ENFORCEMENTS),
    rules: Array.from({ length: 1 + Math.floor(random() * 4) }, (_, r) => ({
      rule_id: `r${r}`,
      name: `rule ${r}`,
      action: pick(random, ACTIONS),
      decision: pick(random, DECISIONS),
      // Two to four conditions each: most rules are narrow, so evaluation walks deep.
      conditions: Array.from({ length: 2 + Math.floor(random() * 3) }, () => condition(random)),
    })),
    tags: {},
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
  }));
}

function buildInputs(count: number, random: () => number) {
  const texts = [
    'Summarise the attached quarterly report in five bullet points.',
    "SELECT id, name FROM customers WHERE region = 'EU'",
    'Please run rm -rf ./build and rebuild the project',
    'my api_key: sk-test-123 should be rotated',
    'a'.repeat(2000) + '!',
  ];
  const actions = [
    'tool:search',
    'tool:shell',
    'tool:fs:write',
    'llm:gpt-4o',
    'llm:claude-sonnet-4',
    'execution:start',
    'llm:gemini-2.5-pro',
  ];
  return Array.from({ length: count }, () => ({
    action: pick(random, actions),
    context: {
      tool_name: pick(random, TOOLS),
      request: { model: pick(random, MODELS) },
      estimated_cost: Math.round(random() * 600) / 100,
      budget: { percent_used: Math.floor(random() * 100) },
      input_text: pick(random, texts),
      user_roles: [pick(random, ROLES)],
      token_count: Math.floor(random() * 10_000),
    },
  }));
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

/**
 * The median time of each context over its evaluations (call `i` used context `i % contexts`),
 * sorted: what the engine costs per context, without the scheduler's noise on a shared machine.
 */
function medianPerContext(latencies: Float64Array, contexts: number): Float64Array {
  const medians = new Float64Array(contexts);
  for (let k = 0; k < contexts; k++) {
    const own: number[] = [];
    for (let i = k; i < latencies.length; i += contexts) own.push(latencies[i] as number);
    own.sort((a, b) => a - b);
    medians[k] = own[Math.floor(own.length / 2)] ?? Number.NaN;
  }
  return medians.sort();
}

function main(): void {
  const evaluations = Number(process.argv[2] ?? 200_000);
  const policyCount = Number(process.argv[3] ?? 200);
  const random = seededRandom(42);
  const policies = buildPolicies(policyCount, random);
  const inputs = buildInputs(1024, random);

  const compileStart = performance.now();
  const ruleset = compileRuleset(policies, 1);
  const compileMs = performance.now() - compileStart;
  const ruleCount = ruleset.steps.length;

  for (let i = 0; i < 20_000; i++) evaluate(ruleset, inputs[i % inputs.length] as (typeof inputs)[number]);

  const latencies = new Float64Array(evaluations);
  const decisions: Record<string, number> = {};
  const started = performance.now();
  for (let i = 0; i < evaluations; i++) {
    const input = inputs[i % inputs.length] as (typeof inputs)[number];
    const t0 = performance.now();
    const result = evaluate(ruleset, input);
    latencies[i] = performance.now() - t0;
    decisions[result.decision] = (decisions[result.decision] ?? 0) + 1;
  }
  const totalMs = performance.now() - started;
  const perContext = medianPerContext(latencies, Math.min(inputs.length, evaluations));
  latencies.sort();
  const offered = inputs.reduce((sum, input) => sum + ruleset.index.candidates(input.action).length, 0);
  const matching = inputs.reduce((sum, input) => sum + ruleset.index.matching(input.action).length, 0);

  const us = (ms: number) => `${(ms * 1000).toFixed(1)} µs`;
  console.log(
    `node ${process.version}, ${policyCount} policies / ${ruleCount} rules, compiled in ${compileMs.toFixed(1)} ms`,
  );
  console.log(`evaluations: ${evaluations}`);
  console.log(
    `rules the action index offers per evaluation: ${(offered / inputs.length).toFixed(0)} of ${ruleCount} on average, ${(matching / inputs.length).toFixed(0)} with a matching pattern`,
  );
  console.log(
    `p50: ${us(percentile(latencies, 0.5))}  p99: ${us(percentile(latencies, 0.99))}  p99.9: ${us(percentile(latencies, 0.999))}  max: ${us(percentile(latencies, 1))}`,
  );
  console.log(
    `each context's median time: p50 ${us(percentile(perContext, 0.5))}  p99 ${us(percentile(perContext, 0.99))}  max ${us(percentile(perContext, 1))} (over ${perContext.length} contexts; a descheduled call does not move it)`,
  );
  console.log(
    `throughput: ${Math.round(evaluations / (totalMs / 1000)).toLocaleString('en-US')} evaluations/s (one core, timing included)`,
  );
  console.log(`decisions: ${JSON.stringify(decisions)}`);
}

main();
