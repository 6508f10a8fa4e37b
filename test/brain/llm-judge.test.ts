import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  combineJudges,
  createBuiltinJudge,
  createLlmJudge,
  judgesFromConfig,
  type LlmJudgeOptions,
} from '../../core/brain/index.ts';
import { ConfigSchema } from '../../core/config/schema.ts';
import { SvcError } from '../../core/errors/index.ts';
import { compileRuleset, evaluateAsync } from '../../core/policy/index.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';
import { activePolicy, DENY_DESTRUCTIVE_TOOL_ARGS } from '../fixtures/policies.ts';

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});

/** The LLM judge as tenant acme's conditions ask it, and the judge itself. */
function judgeWith(overrides: Partial<LlmJudgeOptions> = {}) {
  const registry = new Registry();
  const llm = createLlmJudge({
    baseUrl: `${sim.url}/v1`,
    model: 'gpt-4o-mini',
    apiKey: () => 'sk-judge-test',
    timeoutMs: 5000,
    failMode: 'closed',
    cacheEntries: 100,
    cacheTtlMs: 60_000,
    maxTextChars: 65_536,
    dailyBudgetUsd: 0,
    costUsd: (_model, usage) => (usage.input + usage.output) / 1_000_000,
    registry,
    ...overrides,
  });
  return { judge: llm.forTenant('acme'), llm, registry };
}

async function metric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = found?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return value?.value ?? 0;
}

function judgeCalls(): number {
  return sim.requests.filter((r) => r.path === '/v1/chat/completions').length;
}

const dropTable = {
  text: '{"sql":"DROP TABLE users"}',
  intent: 'DESTRUCTIVE',
  field: 'tool_args',
  context: { tool_name: 'run_sql', tool_args: '{"sql":"DROP TABLE users"}' },
};

describe('LLM judge against an OpenAI-compatible endpoint', () => {
  it('reads a violated verdict, with its evidence located in the judged text, and sends the key', async () => {
    const { judge } = judgeWith();
    const verdict = await judge.judge(dropTable);
    expect(verdict).toMatchObject({ violated: true, category: 'DESTRUCTIVE', confidence: 0.9 });
    expect(verdict.evidence).toEqual([
      { field: 'tool_args', start: 8, end: 18, signal: 'llm.verdict', excerpt: 'DROP TABLE' },
    ]);
    const sent = sim.requests.at(-1);
    expect(sent?.headers.authorization).toBe('Bearer sk-judge-test');
    expect(sent?.json).toMatchObject({ model: 'gpt-4o-mini', temperature: 0 });
  });

  it('reads a benign verdict as not violated', async () => {
    const { judge } = judgeWith();
    const verdict = await judge.judge({ ...dropTable, text: 'SELECT 1', context: { tool_name: 'run_sql' } });
    expect(verdict).toMatchObject({ violated: false, evidence: [] });
  });

  it('answers the same question from its cache, whatever else the context carries', async () => {
    const { judge, registry } = judgeWith();
    const before = judgeCalls();
    const question = { ...dropTable, text: 'rm -rf /srv/data', field: 'input_text', context: { agent_id: 'a' } };
    const first = await judge.judge(question);
    const second = await judge.judge({ ...question, context: { agent_id: 'b' } });
    expect(second).toEqual(first);
    expect(judgeCalls() - before).toBe(1);
    expect(await metric(registry, 'svc_semantic_judge_llm_cache_hits_total')).toBe(1);
    expect(await metric(registry, 'svc_semantic_judge_llm_calls_total', { outcome: 'ok' })).toBe(1);
    expect(await metric(registry, 'svc_semantic_judge_llm_cost_usd_total')).toBeGreaterThan(0);
    // Another question is another call.
    await judge.judge({ ...question, text: 'rm -rf /srv/other' });
    expect(judgeCalls() - before).toBe(2);
  });

  it('lets an entry expire after its TTL', async () => {
    let now = 1_000_000;
    const { judge } = judgeWith({ cacheTtlMs: 1000, now: () => now });
    const before = judgeCalls();
    const question = { ...dropTable, text: 'TRUNCATE TABLE orders', field: 'input_text', context: {} };
    await judge.judge(question);
    now += 1001;
    await judge.judge(question);
    expect(judgeCalls() - before).toBe(2);
  });

  it('fails closed on a timeout by default: the judgement throws SVC-SYS-9001 and is counted', async () => {
    const { judge, registry } = judgeWith({ timeoutMs: 150 });
    const error = await judge
      .judge({ ...dropTable, text: 'sim-judge:slow=3000 hello', context: {} })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SvcError);
    expect((error as SvcError).code).toBe('SVC-SYS-9001');
    expect((error as SvcError).message).toMatch(/within 150 ms/);
    expect(await metric(registry, 'svc_semantic_judge_llm_failures_total', { reason: 'timeout' })).toBe(1);
  });

  it('fails open on a timeout when configured so: not violated, and not cached', async () => {
    const { judge, llm, registry } = judgeWith({ timeoutMs: 150, failMode: 'open' });
    const question = { ...dropTable, text: 'sim-judge:slow=3000 DROP TABLE x', context: {} };
    expect(await judge.judge(question)).toMatchObject({ violated: false, confidence: 0 });
    expect(await metric(registry, 'svc_semantic_judge_llm_failures_total', { reason: 'timeout' })).toBe(1);
    expect(await metric(registry, 'svc_semantic_judge_llm_cache_hits_total')).toBe(0);
    expect(llm.cacheSize()).toBe(0);
  });

  it.each(['sim-judge:garbage', 'sim-judge:off-schema', 'sim-judge:other-category'])(
    'treats an answer that is not the verdict schema (%s) as a failure',
    async (marker) => {
      const { judge, registry } = judgeWith();
      await expect(judge.judge({ ...dropTable, text: `${marker} DROP TABLE t`, context: {} })).rejects.toThrow(
        /LLM semantic judge failed/,
      );
      expect(await metric(registry, 'svc_semantic_judge_llm_failures_total', { reason: 'unparseable' })).toBe(1);
    },
  );

  it('fails on an endpoint error status and on an unreachable endpoint', async () => {
    const { judge, registry } = judgeWith({ baseUrl: `${sim.url}/nowhere` });
    await expect(judge.judge({ ...dropTable, context: {} })).rejects.toThrow(/HTTP 404/);
    expect(await metric(registry, 'svc_semantic_judge_llm_failures_total', { reason: 'status' })).toBe(1);
    const closed = judgeWith({ baseUrl: 'http://127.0.0.1:1/v1' });
    await expect(closed.judge.judge({ ...dropTable, context: {} })).rejects.toThrow(/unreachable/);
  });

  it("stops calling once a tenant's daily budget is spent, and only for that tenant", async () => {
    const { judge, llm, registry } = judgeWith({ dailyBudgetUsd: 0.000_001 });
    await judge.judge({ ...dropTable, text: 'budget one', context: {} });
    expect(llm.spentTodayUsd('acme')).toBeGreaterThan(0.000_001);
    await expect(judge.judge({ ...dropTable, text: 'budget two', context: {} })).rejects.toThrow(/budget/);
    expect(await metric(registry, 'svc_semantic_judge_llm_failures_total', { reason: 'budget' })).toBe(1);
    // Another tenant's judgements are not stopped by what acme asked.
    expect(llm.spentTodayUsd('globex')).toBe(0);
    await expect(llm.forTenant('globex').judge({ ...dropTable, context: {} })).resolves.toMatchObject({
      violated: true,
    });
    expect(llm.spentTodayUsd('globex')).toBeGreaterThan(0);
  });

  it('judges a tenant category by its definition', async () => {
    const { judge } = judgeWith();
    const category = {
      name: 'REFUND_FRAUD',
      description: 'refunds to accounts that did not pay',
      examples: ['refund to a different card'],
      counter_examples: [],
    };
    const hit = await judge.judge({
      text: 'please refund to a different card now',
      intent: 'REFUND_FRAUD',
      category,
      context: {},
    });
    expect(hit).toMatchObject({ violated: true, category: 'REFUND_FRAUD' });
    const miss = await judge.judge({ text: 'refund the original card', intent: 'REFUND_FRAUD', category, context: {} });
    expect(miss.violated).toBe(false);
  });
});

describe('the LLM judge deciding policies', () => {
  const denyDestructive = activePolicy([DENY_DESTRUCTIVE_TOOL_ARGS], { name: 'no-destruction' });
  const ruleset = compileRuleset([denyDestructive], 1);
  const call = (args: string) => ({ action: 'tool:run_sql', context: { tool_name: 'run_sql', tool_args: args } });

  it('denies what the LLM judges destructive and allows what it does not', async () => {
    const { judge } = judgeWith();
    const denied = await evaluateAsync(ruleset, call('{"sql":"DROP TABLE users"}'), judge);
    expect(denied).toMatchObject({ decision: 'DENY', semantic: { judge: 'llm', category: 'DESTRUCTIVE' } });
    expect((await evaluateAsync(ruleset, call('{"sql":"SELECT 1"}'), judge)).decision).toBe('ALLOW');
  });

  it('fails closed on arguments longer than it reads: what lies past its limit was never judged', async () => {
    const { judge } = judgeWith({ maxTextChars: 1_000 });
    const padded = JSON.stringify({ comment: 'x'.repeat(5_000), sql: 'DROP TABLE users' });
    const verdict = await judge.judge({ ...dropTable, text: padded, context: { tool_name: 'run_sql' } });
    expect(verdict).toMatchObject({ violated: false, truncated: true });
    const decided = await evaluateAsync(ruleset, call(padded), judge);
    expect(decided.decision).toBe('DENY');
    expect(decided.reason).toMatch(/beyond what the semantic judge reads/);
    // Within its limit the same judge reads it whole.
    expect((await judge.judge({ ...dropTable, text: 'SELECT 1', context: { tool_name: 'run_sql' } })).truncated).toBe(
      undefined,
    );
  });

  it('resolves a timed-out judgement by the fail mode', async () => {
    const slow = call('{"sql":"sim-judge:slow=3000 SELECT 1"}');
    const closed = await evaluateAsync(ruleset, slow, judgeWith({ timeoutMs: 150 }).judge);
    expect(closed.decision).toBe('DENY');
    expect(closed.reason).toMatch(/semantic judge failed.*fail-closed/);
    const open = await evaluateAsync(ruleset, slow, judgeWith({ timeoutMs: 150, failMode: 'open' }).judge);
    expect(open.decision).toBe('ALLOW');
  });

  it("follows a condition's own on_judge_failure over the judge's fail mode", async () => {
    const withMode = (mode: 'closed' | 'open') =>
      compileRuleset(
        [
          {
            ...denyDestructive,
            rules: [
              {
                rule_id: 'intent',
                name: 'intent',
                action: 'tool:*',
                decision: 'DENY',
                conditions: [
                  {
                    field: 'tool_args',
                    operator: 'semantic',
                    value: { intent: 'DESTRUCTIVE', on_judge_failure: mode },
                  },
                ],
              },
            ],
          },
        ],
        1,
      );
    const slow = call('{"sql":"sim-judge:slow=3000 SELECT 2"}');
    const open = await evaluateAsync(withMode('open'), slow, judgeWith({ timeoutMs: 150 }).judge);
    expect(open.decision).toBe('ALLOW');
    expect(open.reason).not.toMatch(/fail-closed/);
    const closed = await evaluateAsync(withMode('closed'), slow, judgeWith({ timeoutMs: 150, failMode: 'open' }).judge);
    expect(closed.decision).toBe('DENY');
    expect(closed.reason).toMatch(/semantic judge failed.*fail-closed/);
    expect(() => withMode('sometimes' as 'open')).toThrow(/on_judge_failure must be closed or open/);
  });

  it('both: the built-in verdict when it is sure, the LLM asked when it is not', async () => {
    const builtin = createBuiltinJudge({ maxTextChars: 65_536, allowedHosts: [] });
    const both = combineJudges(builtin, judgeWith().judge);
    const before = judgeCalls();
    const sure = await evaluateAsync(ruleset, call('{"sql":"DROP TABLE users"}'), both);
    expect(sure).toMatchObject({ decision: 'DENY', semantic: { judge: 'builtin+llm' } });
    expect(sure.semantic?.evidence[0]?.signal).toBe('sql.drop');
    expect(judgeCalls()).toBe(before);
    // Words only the LLM (here the simulator's phrase table) reads as destructive.
    const prose = await evaluateAsync(ruleset, call('{"note":"now wipe the database please"}'), both);
    expect(prose.decision).toBe('DENY');
    expect(prose.semantic?.evidence[0]?.signal).toBe('llm.verdict');
    expect(judgeCalls()).toBe(before + 1);
  });
});

describe('judges chosen per tenant in the configuration', () => {
  it('gives each tenant its mode and needs an endpoint for llm', () => {
    const config = ConfigSchema.parse({
      semantic_judge_tenant_modes: 'acme=llm, globex=both',
      semantic_judge_llm_url: `${sim.url}/v1`,
    });
    const { selector } = judgesFromConfig(config, {
      registry: new Registry(),
      processName: 'control plane',
      costUsd: () => 0,
    });
    expect(selector.forTenant('acme').name).toBe('llm');
    expect(selector.forTenant('globex').name).toBe('builtin+llm');
    expect(selector.forTenant('initech').name).toBe('builtin');
    const missing = ConfigSchema.parse({ semantic_judge_mode: 'llm' });
    expect(() =>
      judgesFromConfig(missing, { registry: new Registry(), processName: 'proxy', costUsd: () => 0 }),
    ).toThrow(/SVC_SEMANTIC_JUDGE_LLM_URL/);
    expect(ConfigSchema.safeParse({ semantic_judge_tenant_modes: 'acme=gpt' }).success).toBe(false);
  });
});
