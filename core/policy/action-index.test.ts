import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { indexActions } from './action-index.ts';
import { compileActionPattern } from './action-pattern.ts';

const piece = fc.constantFrom('tool', 'llm', 'execution', 'fs', 'gpt-4', 'shell', 'delete', 'x', '');
const pattern = fc
  .array(fc.oneof(piece, fc.constant(':'), fc.constant('*')), { minLength: 1, maxLength: 6 })
  .map((parts) => parts.join(''))
  .filter((p) => p.length > 0);
const action = fc.array(fc.oneof(piece, fc.constant(':')), { minLength: 1, maxLength: 5 }).map((p) => p.join(''));

describe('action index', () => {
  it('lists every rule whose pattern matches the action, in evaluation order', () => {
    fc.assert(
      fc.property(
        fc.array(pattern, { maxLength: 30 }),
        fc.array(action, { minLength: 1, maxLength: 10 }),
        (patterns, actions) => {
          const index = indexActions(patterns);
          const matchers = patterns.map(compileActionPattern);
          for (const a of actions) {
            const candidates = [...index.candidates(a)];
            expect(candidates).toEqual([...candidates].sort((x, y) => x - y));
            expect(new Set(candidates).size).toBe(candidates.length);
            const matching = matchers.flatMap((matches, i) => (matches(a) ? [i] : []));
            for (const i of matching) expect(candidates).toContain(i);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('leaves out the rules of other action types and other exact actions', () => {
    const patterns = ['tool:shell', 'tool:fs:*', 'llm:gpt-4*', '*', 'execution:start', '*:delete', 'tool:shell'];
    const index = indexActions(patterns);
    expect([...index.candidates('tool:shell')]).toEqual([0, 1, 3, 5, 6]);
    expect([...index.candidates('tool:fs:write')]).toEqual([1, 3, 5]);
    expect([...index.candidates('llm:gpt-4o')]).toEqual([2, 3, 5]);
    expect([...index.candidates('mcp:query')]).toEqual([3, 5]);
  });
});
