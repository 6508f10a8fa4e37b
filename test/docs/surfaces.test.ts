import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  emptyCostTotals,
  EnvelopeStatusSchema,
  toRestEnvelope,
  toTrace,
  UpdateEnvelopeStatusRequestSchema,
  type Envelope,
  type EnvelopeStatus,
} from '../../core/domain/index.ts';
import {
  compileRuleset,
  DecisionInputSchema,
  evaluate,
  GuideCreatePolicyRequestSchema,
  guideCreateRequest,
  GuidePolicyTypeSchema,
  OperatorInputSchema,
  policyFromRestCreate,
  POLICY_TYPE_TAG,
  PolicyStatusInputSchema,
  RestCreatePolicyRequestSchema,
  toGuidePolicy,
  toRestEvaluationResult,
  toRestPolicy,
} from '../../core/policy/index.ts';

import { canonicalResourceType } from '../../control-plane/mcp/codecs/audit.ts';
import { budgetFromMcp, McpCreateBudgetSchema } from '../../control-plane/mcp/codecs/budget.ts';
import { toMcpPolicy } from '../../control-plane/mcp/codecs/policy.ts';

const doc = readFileSync(new URL('../../docs/surfaces.md', import.meta.url), 'utf8');

/** The rows of the table under `## heading`, as arrays of trimmed cells. */
function table(heading: string): string[][] {
  const section = doc.split(`## ${heading}\n`)[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|[\s:|-]+\|$/.test(line))
    .slice(1)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

const now = new Date('2026-11-22T10:00:00Z');

function envelope(status: EnvelopeStatus): Envelope {
  return {
    envelope_id: '00000000-0000-4000-8000-000000000001',
    tenant_id: 't',
    budget_id: null,
    execution_id: 'e',
    adapter_type: 'custom',
    native_ref: null,
    checkpoint_id: null,
    status,
    status_reason: null,
    governance: { token_limit: null, cost_limit_usd: null, timeout_seconds: null, policy_set: [] },
    metadata: {},
    cost: emptyCostTotals(),
    created_at: now.toISOString(),
    updated_at: now.toISOString(),
    completed_at: null,
  };
}

function onePolicy(effect: string, status = 'ACTIVE') {
  return policyFromRestCreate(
    RestCreatePolicyRequestSchema.parse({ name: 'p', status, rules: [{ action: 'tool:*', effect }] }),
    { tenantId: 't', policyId: '00000000-0000-4000-8000-000000000002', now },
  );
}

describe('docs/surfaces.md', () => {
  it('envelope status rows match the REST codec and the status route', () => {
    const rows = table('Envelope status');
    expect(rows).toHaveLength(10);
    for (const [canonical, state, reason, grpc] of rows) {
      const rest = toRestEnvelope(envelope(canonical as EnvelopeStatus));
      expect([rest.state, String(rest.termination_reason)], canonical).toEqual([state, reason]);
      expect(UpdateEnvelopeStatusRequestSchema.parse({ status: grpc }).status).toBe(canonical);
    }
  });

  it('policy status rows match the REST codec and every surface spelling', () => {
    for (const [canonical, enabled, mcp, grpc] of table('Policy status and enforcement')) {
      expect(PolicyStatusInputSchema.parse(mcp)).toBe(canonical);
      expect(PolicyStatusInputSchema.parse(grpc)).toBe(canonical);
      expect(String(toRestPolicy(onePolicy('deny', canonical)).enabled), canonical).toBe(enabled);
    }
  });

  it('decision rows match the rule codec and the evaluation result', () => {
    for (const [canonical, ruleEffect, resultEffect, grpc] of table('Policy decision')) {
      const policy = onePolicy(ruleEffect!);
      expect(policy.rules[0]!.decision).toBe(canonical);
      for (const spelling of grpc!.split(', ')) expect(DecisionInputSchema.parse(spelling)).toBe(canonical);
      const result = evaluate(compileRuleset([policy], 1), { action: 'tool:x', context: {} });
      expect(toRestEvaluationResult(result).effect, canonical).toBe(resultEffect);
    }
  });

  it('operator rows parse to the canonical operator from every surface', () => {
    for (const [canonical, rest, concept, grpc] of table('Condition operators')) {
      for (const spelling of [rest, concept, grpc]) {
        if (spelling !== '—') expect(OperatorInputSchema.parse(spelling), spelling).toBe(canonical);
      }
    }
  });

  it('MCP policy type rows round-trip through the MCP codec', () => {
    for (const [mcp, tag] of table('MCP policy type')) {
      const policy = onePolicy('deny');
      expect(toMcpPolicy({ ...policy, tags: { [POLICY_TYPE_TAG]: tag! } }).type).toBe(mcp);
    }
  });

  it('guide policy type rows round-trip through the guide and MCP codecs', () => {
    const rows = table('Guide policy type');
    expect(rows.map((r) => r[0])).toEqual([...GuidePolicyTypeSchema.options]);
    for (const [guide, tag, mcp] of rows) {
      const request = guideCreateRequest(
        GuideCreatePolicyRequestSchema.parse({
          name: 'p',
          policy_type: guide,
          rules: { r: { action: 'tool:*', effect: 'deny' } },
        }),
      );
      expect(request.tags?.[POLICY_TYPE_TAG]).toBe(tag);
      const policy = policyFromRestCreate(request, {
        tenantId: 't',
        policyId: '00000000-0000-4000-8000-000000000003',
        now,
      });
      expect(toGuidePolicy(policy).policy_type).toBe(guide);
      expect(toMcpPolicy(policy).type, guide).toBe(mcp);
    }
  });

  it('trace state rows match the trace codec', () => {
    const rows = table('Trace state');
    expect(rows).toHaveLength(EnvelopeStatusSchema.options.length);
    for (const [canonical, state] of rows) expect(toTrace(envelope(canonical as EnvelopeStatus)).status).toBe(state);
  });

  it('MCP budget period, action and scope rows match what create_budget stores', () => {
    const create = (input: Record<string, unknown>) =>
      budgetFromMcp(McpCreateBudgetSchema.parse({ name: 'b', limit_amount: 5, period: 'DAILY', ...input }));
    for (const [mcp, canonical] of table('MCP budget period')) expect(create({ period: mcp }).period).toBe(canonical);
    for (const [mcp, alert] of table('MCP budget action'))
      expect(create({ action: mcp }).alerts?.find((a) => a.percent === 100)?.action).toBe(alert);
    for (const [mcp, canonical, served] of table('MCP budget scope')) {
      if (served === 'no') {
        expect(() => create({ scope: mcp })).toThrow(/scope/);
        continue;
      }
      const request = create({ scope: mcp, scope_id: 'wf-1' });
      expect(request.workflow_id ?? null, mcp).toBe(canonical!.startsWith('workflow_id = ') ? 'wf-1' : null);
      expect(request.tags?.scope).toBe(mcp);
    }
  });

  it('MCP audit resource type rows name the canonical types', () => {
    for (const [mcp, canonical, served] of table('MCP audit resource types')) {
      if (served === 'yes') expect(canonicalResourceType(mcp!)).toBe(canonical);
    }
  });
});
