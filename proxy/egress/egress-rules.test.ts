import { describe, expect, it } from 'vitest';
import type { EvaluationResult } from '../../core/policy/index.ts';
import { createEgressCheck, parsePorts } from './egress-rules.ts';

type Verdict = { allowed: boolean; result: Pick<EvaluationResult, 'effect'> | null };

function check(verdict: Verdict, options: { ruleset?: boolean; intercepted?: string[] } = {}) {
  return createEgressCheck({
    check: () => verdict as never,
    intercepted: (host, port) => (options.intercepted ?? []).includes(`${host}:${port}`),
    hasRuleset: () => options.ruleset ?? true,
    allowedPorts: parsePorts('80, 443'),
  });
}

describe('createEgressCheck', () => {
  it('allows the listed ports and intercepted destinations when no rule decides', () => {
    const egress = check({ allowed: true, result: { effect: 'no_match' } }, { intercepted: ['tools.internal:7000'] });
    expect(egress('example.com', 443)).toBe('allow');
    expect(egress('example.com', 80)).toBe('allow');
    expect(egress('tools.internal', 7000)).toBe('allow');
    expect(egress('tools.internal', 22)).toBe('deny_port');
    expect(egress('example.com', 5432)).toBe('deny_port');
  });

  it('opens another port only on an explicit network:connect ALLOW', () => {
    expect(check({ allowed: true, result: { effect: 'allow' } })('db.internal', 5432)).toBe('allow');
  });

  it('refuses a network:connect DENY even on a listed port', () => {
    expect(check({ allowed: false, result: { effect: 'deny' } })('example.com', 443)).toBe('deny');
  });

  it('keeps intercepted destinations reachable without a ruleset, and refuses the rest as the fail mode says', () => {
    const closed = check({ allowed: false, result: null }, { ruleset: false, intercepted: ['api.openai.com:443'] });
    expect(closed('api.openai.com', 443)).toBe('allow');
    expect(closed('example.com', 443)).toBe('deny');
    expect(check({ allowed: true, result: null }, { ruleset: false })('example.com', 8443)).toBe('deny_port');
  });
});
