import { describe, expect, it } from 'vitest';
import { compileCondition, type CompiledCheck, type ListReading } from './condition.ts';
import type { PolicyCondition } from './model.ts';

function check(
  operator: PolicyCondition['operator'],
  value: unknown,
  field = 'x',
  reading: ListReading = 'some',
): (context: Record<string, unknown>) => boolean {
  const compiled = compileCondition({ field, operator, value }, reading);
  if (!compiled.ok) throw new Error(compiled.fault.description);
  const condition = compiled.condition as CompiledCheck;
  return (context) => {
    const actual = condition.read(context);
    return actual !== undefined && condition.test(actual);
  };
}

function faultOf(operator: PolicyCondition['operator'], value: unknown, field = 'x') {
  const compiled = compileCondition({ field, operator, value }, 'some');
  return compiled.ok ? null : compiled.fault;
}

describe('compileCondition', () => {
  it('eq and neq compare scalars, tolerating string-typed context values', () => {
    expect(check('eq', 'gpt-4o')({ x: 'gpt-4o' })).toBe(true);
    expect(check('eq', 'gpt-4o')({ x: 'gpt-4' })).toBe(false);
    expect(check('eq', 5)({ x: '5' })).toBe(true);
    expect(check('eq', '5')({ x: 5 })).toBe(true);
    expect(check('eq', true)({ x: 'true' })).toBe(true);
    expect(check('eq', true)({ x: false })).toBe(false);
    expect(check('eq', null)({ x: null })).toBe(true);
    expect(check('eq', 0)({ x: '  ' })).toBe(false);
    expect(check('neq', 'prod')({ x: 'dev' })).toBe(true);
    expect(check('neq', 'prod')({ x: 'prod' })).toBe(false);
  });

  it('in and not_in test membership', () => {
    const isAdmin = check('in', ['admin', 'owner']);
    expect(isAdmin({ x: 'owner' })).toBe(true);
    expect(isAdmin({ x: 'viewer' })).toBe(false);
    const notBlocked = check('not_in', ['shell', 'exec']);
    expect(notBlocked({ x: 'search' })).toBe(true);
    expect(notBlocked({ x: 'shell' })).toBe(false);
    expect(check('in', [1, 2, 3])({ x: '2' })).toBe(true);
    expect(check('in', [])({ x: 'a' })).toBe(false);
  });

  it('a list meets a detecting test when some element does, and an allowing one only when every element does', () => {
    const decoy = { x: ['evil.example', 'uploads.acme.example'] };
    expect(check('in', ['uploads.acme.example'], 'x', 'some')(decoy)).toBe(true);
    expect(check('in', ['uploads.acme.example'], 'x', 'every')(decoy)).toBe(false);
    expect(check('in', ['uploads.acme.example'], 'x', 'every')({ x: ['uploads.acme.example'] })).toBe(true);
    // A deny on hosts outside the list sees the one outside it, however many inside it come along.
    expect(check('not_in', ['uploads.acme.example'], 'x', 'some')(decoy)).toBe(true);
    expect(check('not_in', ['uploads.acme.example'], 'x', 'every')(decoy)).toBe(false);
    expect(check('neq', 'evil.example', 'x', 'every')(decoy)).toBe(false);
    expect(check('neq', 'evil.example', 'x', 'some')(decoy)).toBe(true);
    expect(check('matches', '\\.acme\\.example$', 'x', 'every')(decoy)).toBe(false);
    expect(check('matches', '\\.acme\\.example$', 'x', 'some')(decoy)).toBe(true);
    expect(check('lt', 10, 'x', 'every')({ x: [1, 2, 30] })).toBe(false);
    expect(check('gt', 10, 'x', 'some')({ x: [1, 2, 30] })).toBe(true);
    // An empty list shows nothing allowed, and nothing to detect.
    expect(check('not_in', ['a'], 'x', 'every')({ x: [] })).toBe(false);
    expect(check('in', ['a'], 'x', 'some')({ x: [] })).toBe(false);
    // A scalar is read the same either way.
    expect(check('in', ['a'], 'x', 'every')({ x: 'a' })).toBe(true);
    // contains asks whether the list holds the value, whatever else it holds.
    expect(check('contains', 'admin', 'x', 'every')({ x: ['viewer', 'admin'] })).toBe(true);
  });

  it('gt, gte, lt, lte compare numbers, numeric strings and dates', () => {
    expect(check('gt', 80)({ x: 80.5 })).toBe(true);
    expect(check('gt', 80)({ x: 80 })).toBe(false);
    expect(check('gte', 80)({ x: 80 })).toBe(true);
    expect(check('lt', '1000')({ x: '999' })).toBe(true);
    expect(check('lte', 0.5)({ x: 0.5 })).toBe(true);
    expect(check('lt', 0.5, 'x', 'every')({ x: 'not a number' })).toBe(false);
    expect(check('gt', 1, 'x', 'every')({ x: true })).toBe(false);
    expect(check('gt', 0, 'x', 'every')({ x: '' })).toBe(false);
    expect(check('gte', 0, 'x', 'every')({ x: ' ' })).toBe(false);
    const afterNewYear = check('gte', '2026-01-01T00:00:00Z');
    expect(afterNewYear({ x: '2026-03-01T12:00:00Z' })).toBe(true);
    expect(afterNewYear({ x: '2025-12-31T23:59:59Z' })).toBe(false);
    expect(afterNewYear({ x: new Date('2026-02-01T00:00:00Z') })).toBe(true);
    expect(check('lt', '2026-01-01')({ x: Date.parse('2025-06-01') })).toBe(true);
  });

  it('matches searches with a linear-time regex, (?i) for case-insensitive', () => {
    const sql = check('matches', String.raw`(?i)\bdrop\s+table\b`);
    expect(sql({ x: 'please DROP  TABLE users' })).toBe(true);
    expect(sql({ x: 'dropped tables' })).toBe(false);
    expect(check('matches', '^gpt-4')({ x: ['claude', 'gpt-4o'] })).toBe(true);
    expect(check('matches', '^\\d+$')({ x: 42 })).toBe(true);
    expect(check('matches', 'a', 'x', 'every')({ x: { a: 1 } })).toBe(false);
  });

  it('contains finds substrings in strings and elements in arrays', () => {
    expect(check('contains', 'password')({ x: 'my password is' })).toBe(true);
    expect(check('contains', 'password')({ x: 'nothing here' })).toBe(false);
    expect(check('contains', 'shell')({ x: ['search', 'shell'] })).toBe(true);
    expect(check('contains', 3)({ x: [1, '3'] })).toBe(true);
    expect(check('contains', 3)({ x: 'abc3' })).toBe(false);
  });

  it('a value a comparison cannot read as a number meets a deny and no allow', () => {
    for (const amount of ['5_000', '５０００', '5000.00 USD', true, { value: 5000 }]) {
      expect(check('gt', 1000, 'x', 'some')({ x: amount })).toBe(true);
      expect(check('lte', 1000, 'x', 'some')({ x: amount })).toBe(true);
      expect(check('gt', 1000, 'x', 'every')({ x: amount })).toBe(false);
      expect(check('lte', 1000, 'x', 'every')({ x: amount })).toBe(false);
    }
    // A null is a value not given.
    expect(check('gt', 1000, 'x', 'some')({ x: null })).toBe(false);
    expect(check('gt', 1000, 'x', 'some')({ x: '5e3' })).toBe(true);
    expect(check('gt', 1000, 'x', 'some')({ x: '999' })).toBe(false);
  });

  it('an object where a scalar is compared meets a deny and no allow', () => {
    expect(check('eq', 'prod', 'x', 'some')({ x: { env: 'dev' } })).toBe(true);
    expect(check('in', ['prod'], 'x', 'some')({ x: { env: 'dev' } })).toBe(true);
    expect(check('neq', 'prod', 'x', 'every')({ x: { env: 'prod' } })).toBe(false);
    expect(check('not_in', ['prod'], 'x', 'every')({ x: [{ env: 'prod' }] })).toBe(false);
  });

  it("matches lets a restrictive rule's . cross a line break, and not an allow's", () => {
    // The agent chooses where its text breaks: a command split over lines is one command.
    const dropTable = '(?i)drop.*table';
    expect(check('matches', dropTable, 'x', 'some')({ x: 'DROP\nTABLE users' })).toBe(true);
    expect(check('matches', dropTable, 'x', 'some')({ x: ['ok', 'drop\r\n\ttable'] })).toBe(true);
    expect(check('matches', dropTable, 'x', 'some')({ x: { sql: 'DROP\nTABLE users' } })).toBe(true);
    // An allow-list pattern admits one line, not a second one after it.
    const safe = '^safe-.*$';
    expect(check('matches', safe, 'x', 'every')({ x: 'safe-x' })).toBe(true);
    expect(check('matches', safe, 'x', 'every')({ x: 'safe-x\nrm -rf /' })).toBe(false);
    expect(check('matches', safe, 'x', 'every')({ x: ['safe-a', 'safe-b\nrm -rf /'] })).toBe(false);
    // A pattern may still say otherwise for itself.
    expect(check('matches', '(?-s:drop.*table)', 'x', 'some')({ x: 'drop\ntable' })).toBe(false);
    expect(check('matches', '(?s)^safe-.*$', 'x', 'every')({ x: 'safe-x\nrm -rf /' })).toBe(true);
  });

  it('a deny reads an object or a list as its JSON text for matches and contains', () => {
    const args = { x: { command: 'rm -rf /' } };
    expect(check('matches', 'rm -rf', 'x', 'some')(args)).toBe(true);
    expect(check('contains', 'rm -rf', 'x', 'some')(args)).toBe(true);
    expect(check('matches', 'rm -rf', 'x', 'every')(args)).toBe(false);
    expect(check('contains', 'rm -rf', 'x', 'every')(args)).toBe(false);
    const argv = { x: ['bash', '-c', 'rm -rf /'] };
    expect(check('contains', 'rm -rf', 'x', 'some')(argv)).toBe(true);
    expect(check('contains', 'rm -rf', 'x', 'every')(argv)).toBe(false);
    expect(check('matches', String.raw`bash","-c","rm`, 'x', 'some')(argv)).toBe(true);
    expect(check('contains', 'admin', 'x', 'every')({ x: ['viewer', 'admin'] })).toBe(true);
    expect(check('contains', 'rm -rf', 'x', 'some')({ x: { command: 'ls' } })).toBe(false);
    // A number is not looked for in an object's text: the object holds it.
    expect(check('contains', 5, 'x', 'some')({ x: { a: 1 } })).toBe(true);
    expect(check('contains', 5, 'x', 'some')({ x: [1, 2] })).toBe(false);
  });

  it('compares identity fields without regard to case', () => {
    expect(check('in', ['DeleteRepo'], 'tool_name')({ tool_name: 'deleterepo' })).toBe(true);
    expect(check('in', ['DeleteRepo'], 'tool_name')({ tool_name: 'DELETEREPO' })).toBe(true);
    expect(check('eq', 'gpt-4o', 'model')({ model: 'GPT-4o' })).toBe(true);
    expect(check('neq', 'gpt-4o', 'model', 'every')({ model: 'GPT-4O' })).toBe(false);
    expect(check('not_in', ['api.acme.example'], 'host', 'every')({ host: 'API.acme.example' })).toBe(false);
    expect(check('contains', 'Shell', 'declared_tools')({ declared_tools: ['SHELL'] })).toBe(true);
    expect(check('contains', 'delete', 'tool_name')({ tool_name: 'DeleteRepo' })).toBe(true);
    expect(check('matches', '^delete', 'tool_name')({ tool_name: 'DeleteRepo' })).toBe(true);
    expect(check('matches', '(?s)^delete', 'tool_name')({ tool_name: 'DeleteRepo' })).toBe(true);
    expect(check('eq', 'ſhell', 'tool')({ tool: 'SHELL' })).toBe(true);
    // Other fields keep their case.
    expect(check('eq', 'Prod', 'env')({ env: 'prod' })).toBe(false);
  });

  it('refuses values that do not suit the operator, naming the value', () => {
    expect(faultOf('in', 'admin')).toEqual({ part: 'value', description: 'in needs an array value' });
    expect(faultOf('not_in', [1, { a: 1 }])?.description).toMatch(/element 1/);
    expect(faultOf('eq', ['a'])?.part).toBe('value');
    expect(faultOf('eq', undefined)?.part).toBe('value');
    expect(faultOf('gt', 'soon')?.description).toMatch(/number or an ISO-8601 date/);
    expect(faultOf('gt', '1 apple')?.part).toBe('value');
    expect(faultOf('lt', Number.POSITIVE_INFINITY)?.part).toBe('value');
    expect(faultOf('matches', '(unclosed')?.description).toMatch(/regular expression/);
    expect(faultOf('matches', String.raw`(a)\1`)?.description).toMatch(/regular expression/);
    expect(faultOf('matches', '(?=lookahead)')?.description).toMatch(/regular expression/);
    expect(faultOf('matches', 5)?.part).toBe('value');
    expect(faultOf('contains', { a: 1 })?.part).toBe('value');
    expect(faultOf('semantic', '')?.part).toBe('value');
    expect(faultOf('semantic', { intent: 'DESTRUCTIVE', min_confidence: 2 })?.description).toMatch(/min_confidence/);
  });

  it('refuses a malformed field path', () => {
    expect(faultOf('eq', 'a', 'request..model')?.part).toBe('field');
  });

  it('compiles semantic conditions for the judge', () => {
    const plain = compileCondition({ field: 'input_text', operator: 'semantic', value: 'DESTRUCTIVE' }, 'some');
    expect(plain.ok && plain.condition).toMatchObject({ kind: 'semantic', intent: 'DESTRUCTIVE', minConfidence: 0.5 });
    const tuned = compileCondition(
      {
        field: 'input_text',
        operator: 'semantic',
        value: { intent: 'SUSPICIOUS', min_confidence: 0.8 },
      },
      'some',
    );
    expect(tuned.ok && tuned.condition).toMatchObject({ kind: 'semantic', intent: 'SUSPICIOUS', minConfidence: 0.8 });
  });
});
