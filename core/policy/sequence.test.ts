import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SvcError } from '../errors/index.ts';
import { compilePolicy } from './compile-policy.ts';
import { compileCondition, type CompiledCheck } from './condition.ts';
import { compileRuleset, evaluate } from './engine.ts';
import { activePolicy } from '../../test/fixtures/policies.ts';
import { matchInOrder, MAX_SEQUENCE_ACTIONS } from './sequence.ts';

const NOW = Date.parse('2026-11-23T12:00:00Z');

const EXFILTRATION = {
  steps: [
    {
      action: 'tool:read_file',
      conditions: [{ field: 'tool_args', operator: 'REGEX', value: 'secret|\\.env|id_rsa' }],
    },
  ],
  within_seconds: 300,
  category: 'DATA_EXFILTRATION',
};

function read(path: string, secondsAgo: number) {
  return {
    action: 'tool:read_file',
    tool_name: 'read_file',
    tool_args: JSON.stringify({ path }),
    at: NOW - secondsAgo * 1000,
  };
}
function post(host: string, secondsAgo: number) {
  return {
    action: 'tool:http_post',
    tool_name: 'http_post',
    tool_args: `{"url":"https://${host}/x"}`,
    at: NOW - secondsAgo * 1000,
  };
}

function sequenceTest(value: unknown): (actual: unknown) => boolean {
  const compiled = compileCondition({ field: 'recent_actions', operator: 'sequence', value }, 'some');
  if (!compiled.ok) throw new Error(compiled.fault.description);
  return (compiled.condition as CompiledCheck).test;
}

beforeEach(() => {
  vi.useFakeTimers({ now: NOW, toFake: ['Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('matchInOrder', () => {
  it('finds the steps in order, each in a later item than the one before', () => {
    const is = (x: string) => (item: string) => item === x;
    expect(matchInOrder(['a', 'x', 'b', 'c'], [is('a'), is('b'), is('c')])).toBe(true);
    expect(matchInOrder(['b', 'a'], [is('a'), is('b')])).toBe(false);
    // One item cannot serve two steps.
    expect(matchInOrder(['a'], [is('a'), is('a')])).toBe(false);
    expect(matchInOrder(['a', 'a'], [is('a'), is('a')])).toBe(true);
    expect(matchInOrder([], [is('a')])).toBe(false);
  });
});

describe('a sequence condition', () => {
  const matches = sequenceTest(EXFILTRATION);

  it('matches when an earlier action fits the step inside the window', () => {
    expect(matches([read('/app/.env', 60)])).toBe(true);
    expect(matches([post('a.example', 90), read('~/.ssh/id_rsa', 30)])).toBe(true);
  });

  it('does not match an earlier action that fails the step conditions or the pattern', () => {
    expect(matches([read('docs/readme.md', 60)])).toBe(false);
    expect(matches([post('secret.example', 60)])).toBe(false);
    expect(matches([])).toBe(false);
    expect(matches('not a list')).toBe(false);
  });

  it('forgets what is older than the window, and what claims to come from the future', () => {
    expect(matches([read('/app/.env', 301)])).toBe(false);
    expect(matches([read('/app/.env', 299)])).toBe(true);
    expect(matches([read('/app/.env', -10)])).toBe(false);
    vi.setSystemTime(NOW + 60_000);
    expect(matches([read('/app/.env', 250)])).toBe(false);
  });

  it('keeps the order of several steps', () => {
    const twoSteps = sequenceTest({
      steps: [{ action: 'tool:list_dir' }, { action: 'tool:read_file', conditions: EXFILTRATION.steps[0]?.conditions }],
      within_seconds: 600,
    });
    const list = { action: 'tool:list_dir', tool_name: 'list_dir', tool_args: '{}', at: NOW - 100_000 };
    expect(twoSteps([list, read('.env', 50)])).toBe(true);
    expect(twoSteps([read('.env', 150), { ...list, at: NOW - 50_000 }])).toBe(false);
  });

  it('reads only the newest actions of a longer list, and passes over malformed entries', () => {
    const noise = Array.from({ length: MAX_SEQUENCE_ACTIONS }, (_, i) => post('a.example', 10 + i / 100));
    expect(matches([read('.env', 100), ...noise])).toBe(false);
    expect(matches([null, 7, { action: 'tool:read_file' }, read('.env', 100)])).toBe(true);
  });

  it('refuses a bad value, naming the part at fault', () => {
    const faultOf = (value: unknown) => {
      const compiled = compileCondition({ field: 'recent_actions', operator: 'sequence', value }, 'some');
      return compiled.ok ? null : compiled.fault.description;
    };
    expect(faultOf({ steps: [], within_seconds: 10 })).toMatch(/^sequence value\.steps: /);
    expect(faultOf({ steps: [{ action: 'tool:x' }] })).toMatch(/^sequence value\.within_seconds: /);
    expect(faultOf({ steps: [{ action: 'tool:x' }], within_seconds: 10, category: 'exfil' })).toMatch(
      /^sequence value\.category: /,
    );
    expect(
      faultOf({
        steps: [{ action: 'tool:x', conditions: [{ field: 'tool_args', operator: 'semantic', value: 'X' }] }],
        within_seconds: 10,
      }),
    ).toMatch(/^sequence value\.steps\.0\.conditions\.0\.operator: /);
    expect(
      faultOf({
        steps: [{ action: 'tool:x', conditions: [{ field: 'tool_args', operator: 'matches', value: '(' }] }],
        within_seconds: 10,
      }),
    ).toMatch(/^sequence value\.steps\.0\.conditions\.0\.value: /);
    expect(faultOf('DATA_EXFILTRATION')).toMatch(/^sequence value: /);
  });
});

describe('a rule with a sequence condition', () => {
  const ruleset = compileRuleset(
    [
      activePolicy([
        {
          rule_id: 'secret-then-post',
          name: '',
          action: 'tool:http_post',
          decision: 'DENY',
          conditions: [
            { field: 'recent_actions', operator: 'sequence', value: EXFILTRATION },
            { field: 'tool_hosts', operator: 'not_in', value: ['uploads.acme.example'] },
          ],
        },
      ]),
    ],
    1,
  );

  it('denies the action that completes the pattern, naming its category', () => {
    const result = evaluate(ruleset, {
      action: 'tool:http_post',
      context: { tool_hosts: ['collector.example.net'], recent_actions: [read('/srv/secrets.yaml', 20)] },
    });
    expect(result).toMatchObject({
      decision: 'DENY',
      matched_rule: 'secret-then-post',
      sequence: { category: 'DATA_EXFILTRATION' },
    });
  });

  it('allows it without the earlier action, to an allowed host, or in the other order', () => {
    const allowed = (context: Record<string, unknown>) =>
      evaluate(ruleset, { action: 'tool:http_post', context }).decision;
    expect(allowed({ tool_hosts: ['collector.example.net'], recent_actions: [] })).toBe('ALLOW');
    expect(allowed({ tool_hosts: ['collector.example.net'] })).toBe('ALLOW');
    expect(allowed({ tool_hosts: ['uploads.acme.example'], recent_actions: [read('.env', 20)] })).toBe('ALLOW');
    const result = evaluate(ruleset, {
      action: 'tool:read_file',
      context: { recent_actions: [post('collector.example.net', 20)] },
    });
    expect(result.decision).toBe('ALLOW');
    expect(result.sequence).toBeUndefined();
  });

  it('is refused when written badly, with the field of the fault', () => {
    let error: unknown;
    try {
      compilePolicy(
        activePolicy([
          {
            rule_id: 'r',
            name: '',
            action: 'tool:*',
            decision: 'DENY',
            conditions: [
              { field: 'recent_actions', operator: 'sequence', value: { steps: [{ action: '' }], within_seconds: 5 } },
            ],
          },
        ]),
      );
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SvcError);
    expect((error as SvcError).code).toBe('SVC-POL-2003');
    expect((error as SvcError).message).toContain('rules.0.conditions.0.value: sequence value.steps.0.action');
  });
});
