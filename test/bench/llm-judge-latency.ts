/**
 * What the LLM judge adds to a policy decision that reaches a SEMANTIC condition: the built-in
 * judge in process, the LLM judge asking an endpoint (the provider simulator in judge mode, on
 * loopback: the figure is the judge's own overhead, a real model adds its answer time), and the
 * LLM judge answering from its cache.
 *
 *   node test/bench/llm-judge-latency.ts [--rounds 200]
 */
import { Registry } from 'prom-client';
import { createBuiltinJudge, createLlmJudge } from '../../core/brain/index.ts';
import { compileRuleset, evaluate, evaluateAsync } from '../../core/policy/index.ts';
import { activePolicy, DENY_DESTRUCTIVE_TOOL_ARGS } from '../fixtures/policies.ts';
import { startSimulator } from '../simulator/index.ts';

const at = process.argv.indexOf('--rounds');
const rounds = at >= 0 ? Number(process.argv[at + 1]) : 200;

const policy = activePolicy([DENY_DESTRUCTIVE_TOOL_ARGS], { tenant_id: 'bench', name: 'no-destruction' });
const ruleset = compileRuleset([policy], 1);
const input = (i: number) => ({
  action: 'tool:run_sql',
  context: { tool_name: 'run_sql', tool_args: JSON.stringify({ sql: `SELECT * FROM orders WHERE id = ${i}` }) },
});

function summary(name: string, times: number[]): void {
  times.sort((a, b) => a - b);
  const q = (p: number) => (times[Math.min(times.length - 1, Math.floor(p * times.length))] as number).toFixed(3);
  console.log(`${name.padEnd(34)} p50 ${q(0.5)} ms  p99 ${q(0.99)} ms  (${times.length} decisions)`);
}

async function timed(run: (i: number) => unknown): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    await run(i);
    times.push(performance.now() - started);
  }
  return times;
}

const sim = await startSimulator();
try {
  const builtin = createBuiltinJudge({ maxTextChars: 65_536, allowedHosts: [] });
  const llm = createLlmJudge({
    baseUrl: `${sim.url}/v1`,
    model: 'gpt-4o-mini',
    apiKey: () => undefined,
    timeoutMs: 2000,
    failMode: 'closed',
    cacheEntries: 10_000,
    cacheTtlMs: 3_600_000,
    maxTextChars: 65_536,
    dailyBudgetUsd: 0,
    costUsd: () => 0,
    registry: new Registry(),
  }).forTenant('bench');
  await timed((i) => evaluateAsync(ruleset, input(-1 - i), llm));
  summary('built-in judge (in process)', await timed((i) => evaluate(ruleset, input(i), builtin)));
  summary('LLM judge, each question new', await timed((i) => evaluateAsync(ruleset, input(i), llm)));
  summary('LLM judge, answered from its cache', await timed((i) => evaluateAsync(ruleset, input(i), llm)));
} finally {
  await sim.close();
}
