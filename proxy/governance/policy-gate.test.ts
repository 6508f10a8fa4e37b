import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createBuiltinJudge } from '../../core/brain/index.ts';
import { compileRuleset } from '../../core/policy/engine.ts';
import { activePolicy } from '../../test/fixtures/policies.ts';
import { createGovernanceMetrics } from '../metrics/index.ts';
import { PolicyGate, type ApprovalWait, type GateVerdict } from './policy-gate.ts';

const policy = activePolicy([
  { rule_id: 'r-approve', name: 'r-approve', action: 'llm:gpt-4o', decision: 'REQUIRE_APPROVAL', conditions: [] },
  { rule_id: 'r-deny', name: 'r-deny', action: 'llm:gpt-3*', decision: 'DENY', conditions: [] },
]);

/** A gate whose approval waits are recorded and answered with an approval. */
function gate(): { gate: PolicyGate; waits: { action: string; verdict: GateVerdict }[] } {
  const waits: { action: string; verdict: GateVerdict }[] = [];
  const approvals: ApprovalWait = {
    await: (action, _context, verdict) => {
      waits.push({ action, verdict });
      return Promise.resolve({ ...verdict, allowed: true, message: 'approved' });
    },
  };
  const rulesets = { current: compileRuleset([policy], 1) };
  const metrics = createGovernanceMetrics(new Registry(), 10, () => false);
  return {
    gate: new PolicyGate(
      rulesets,
      'closed',
      metrics,
      createBuiltinJudge({ maxTextChars: 1024, allowedHosts: [] }),
      undefined,
      approvals,
    ),
    waits,
  };
}

describe('PolicyGate and approvals', () => {
  it('hands a REQUIRE_APPROVAL call given its client signal to the approval wait', async () => {
    const { gate: g, waits } = gate();
    const verdict = await g.checkJudged(
      'llm:gpt-4o',
      {},
      {
        signal: () => new AbortController().signal,
        bytes: 100,
      },
    );
    expect(verdict).toMatchObject({ allowed: true, message: 'approved' });
    expect(waits).toHaveLength(1);
    expect(waits[0]?.verdict).toMatchObject({ allowed: false, code: 'SVC-POL-2004' });
    expect(waits[0]?.verdict.result?.matched_rule).toBe('r-approve');
  });

  it('refuses REQUIRE_APPROVAL at once without a client signal (tool calls), and never holds ALLOW or DENY', async () => {
    const { gate: g, waits } = gate();
    expect(await g.checkJudged('llm:gpt-4o', {})).toMatchObject({ allowed: false, code: 'SVC-POL-2004' });
    // The signal is made only for a call that is held: neither of these is.
    let made = 0;
    const signal = {
      signal: () => {
        made++;
        return new AbortController().signal;
      },
      bytes: 100,
    };
    expect(await g.checkJudged('llm:gpt-3.5-turbo', {}, signal)).toMatchObject({
      allowed: false,
      code: 'SVC-POL-2001',
    });
    expect((await g.checkJudged('llm:gpt-4o-mini', {}, signal)).allowed).toBe(true);
    expect(waits).toHaveLength(0);
    expect(made).toBe(0);
  });
});
