import { describe, expect, it } from 'vitest';
import {
  compileRuleset,
  evaluate,
  type CompiledRuleset,
  type Policy,
  type PolicyRule,
} from '../../core/policy/index.ts';
import { activePolicy } from '../../test/fixtures/policies.ts';
import { createEgressCheck, parsePorts } from './egress-rules.ts';

function policy(rules: PolicyRule[], enforcement: Policy['enforcement'] = 'BLOCK'): Policy {
  return activePolicy(rules, { enforcement });
}

function rule(action: string, decision: PolicyRule['decision'], conditions: PolicyRule['conditions'] = []): PolicyRule {
  return { rule_id: `${action}-${decision}`, name: action, action, decision, conditions };
}

/** The egress check over `policies` (none: no ruleset synced, refused as the closed fail mode does). */
function egress(policies: Policy[] | null, intercepted: string[] = []) {
  const ruleset: CompiledRuleset | null = policies === null ? null : compileRuleset(policies, 1);
  return createEgressCheck({
    check: (action, context) => {
      if (ruleset === null) return { allowed: false, result: null };
      const result = evaluate(ruleset, { action, context });
      return { allowed: result.allowed, result };
    },
    intercepted: (host, port) => intercepted.includes(`${host}:${port}`),
    ruleset: () => ruleset,
    allowedPorts: parsePorts('80, 443'),
  });
}

describe('createEgressCheck', () => {
  it('allows the listed ports and intercepted destinations when no rule decides', () => {
    const check = egress([], ['tools.internal:7000']);
    expect(check('example.com', 443)).toBe('allow');
    expect(check('example.com', 80)).toBe('allow');
    expect(check('tools.internal', 7000)).toBe('allow');
    expect(check('tools.internal', 22)).toBe('deny_port');
    expect(check('example.com', 5432)).toBe('deny_port');
  });

  it('opens another port only on an ALLOW rule written for the network', () => {
    const dbPort = { field: 'port', operator: 'eq' as const, value: 5432 };
    expect(egress([policy([rule('network:connect', 'ALLOW', [dbPort])])])('db.internal', 5432)).toBe('allow');
    expect(egress([policy([rule('network:*', 'ALLOW')])])('db.internal', 5432)).toBe('allow');
  });

  it('reads what the deciding rule was written for from the result, not from a search of the ruleset', () => {
    const deciding = compileRuleset([policy([rule('network:connect', 'ALLOW')])], 2);
    const check = createEgressCheck({
      check: (action, context) => ({ allowed: true, result: evaluate(deciding, { action, context }) }),
      intercepted: () => false,
      // A ruleset that holds no rule: the decision names its own.
      ruleset: () => compileRuleset([], 1),
      allowedPorts: parsePorts('443'),
    });
    expect(check('db.internal', 5432)).toBe('allow');
  });

  it('opens no port on a WARN, a monitored DENY or an ALLOW of every action', () => {
    const highPorts = { field: 'port', operator: 'gt' as const, value: 1024 };
    expect(egress([policy([rule('network:connect', 'DENY', [highPorts])], 'WARN')])('db.internal', 5432)).toBe(
      'deny_port',
    );
    expect(egress([policy([rule('*', 'WARN')])])('db.internal', 5432)).toBe('deny_port');
    expect(egress([policy([rule('*', 'ALLOW')])])('db.internal', 5432)).toBe('deny_port');
    expect(egress([policy([rule('network:connect', 'WARN')])])('db.internal', 5432)).toBe('deny_port');
  });

  it('refuses a network:connect DENY even on a listed port', () => {
    expect(egress([policy([rule('network:connect', 'DENY')])])('example.com', 443)).toBe('deny');
  });

  it('keeps intercepted destinations reachable without a ruleset, and refuses the rest as the fail mode says', () => {
    const closed = egress(null, ['api.openai.com:443']);
    expect(closed('api.openai.com', 443)).toBe('allow');
    expect(closed('example.com', 443)).toBe('deny');
  });
});
