import { describe, expect, it } from 'vitest';
import { compileActionPattern } from './action-pattern.ts';

describe('compileActionPattern', () => {
  const cases: Array<[string, string, boolean]> = [
    ['execution:start', 'execution:start', true],
    ['execution:start', 'execution:started', false],
    ['tool:*', 'tool:shell', true],
    ['tool:*', 'tool:', true],
    ['tool:*', 'llm:gpt-4', false],
    ['llm:gpt-4*', 'llm:gpt-4o-mini', true],
    ['llm:gpt-4*', 'llm:gpt-3.5-turbo', false],
    ['*', 'anything at all', true],
    ['**', '', true],
    ['*:delete', 'tool:delete', true],
    ['*:delete', 'tool:delete-all', false],
    ['tool:*:write', 'tool:fs:write', true],
    ['tool:*:write', 'tool:write', false],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'acb', false],
    ['ab*ba', 'aba', false],
    ['*x*x*', 'x', false],
    ['*x*x*', 'xx', true],
  ];
  it.each(cases)('%s against %s → %s', (pattern, action, expected) => {
    expect(compileActionPattern(pattern)(action)).toBe(expected);
  });

  it('refuses an empty pattern', () => {
    expect(() => compileActionPattern('')).toThrow(/empty/);
  });
});
