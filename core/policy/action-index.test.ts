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

function rules(patterns: readonly string[]) {
  return patterns.map((action) => ({ action, matchesAction: compileActionPattern(action) }));
}

describe('action index', () => {
  it('lists every rule whose pattern matches the action, in evaluation order', () => {
    fc.assert(
      fc.property(
        fc.array(pattern, { maxLength: 30 }),
        fc.array(action, { minLength: 1, maxLength: 10 }),
        (patterns, actions) => {
          const index = indexActions(rules(patterns));
          const matchers = patterns.map(compileActionPattern);
          // Twice: the second round answers from what the index remembers.
          for (const a of [...actions, ...actions]) {
            const candidates = [...index.candidates(a)];
            expect(candidates).toEqual([...candidates].sort((x, y) => x - y));
            expect(new Set(candidates).size).toBe(candidates.length);
            const matching = matchers.flatMap((matches, i) => (matches(a) ? [i] : []));
            for (const i of matching) expect(candidates).toContain(i);
            expect([...index.matching(a)]).toEqual(matching);
            // One list per type, holding every rule that matches an action of it.
            const ofType = index.ofType(a);
            expect(index.ofType(`${a.split(':')[0] as string}:other`)).toBe(ofType);
            expect(matching.filter((i) => !ofType.includes(i))).toEqual([]);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('leaves out the rules of other action types and other exact actions', () => {
    const patterns = ['tool:shell', 'tool:fs:*', 'llm:gpt-4*', '*', 'execution:start', '*:delete', 'tool:shell'];
    const index = indexActions(rules(patterns));
    expect([...index.candidates('tool:shell')]).toEqual([0, 1, 3, 5, 6]);
    expect([...index.candidates('tool:fs:write')]).toEqual([1, 3, 5]);
    expect([...index.candidates('llm:gpt-4o')]).toEqual([2, 3, 5]);
    expect([...index.candidates('mcp:query')]).toEqual([3, 5]);
    expect([...index.ofType('tool:other')]).toEqual([0, 1, 3, 5, 6]);
    expect([...index.ofType('llm:claude')]).toEqual([2, 3, 5]);
    expect([...index.ofType('mcp:query')]).toEqual([3, 5]);
  });

  it('answers an action it does not remember, however many it has seen', () => {
    const index = indexActions(rules(['tool:*', '*:x', 'llm:gpt-4*']));
    for (let i = 0; i < 2000; i++) expect([...index.matching(`tool:t${i}:x`)]).toEqual([0, 1]);
    const long = `tool:${'a'.repeat(1000)}`;
    expect([...index.matching(long)]).toEqual([0]);
    expect([...index.matching(long)]).toEqual([0]);
    expect([...index.matching('llm:gpt-4o')]).toEqual([2]);
    // A large ruleset: the remembered lists stay within their bound and answers stay right.
    const wide = indexActions(rules(Array.from({ length: 3000 }, (_, i) => (i % 3 === 0 ? '*' : `tool:*`))));
    for (let i = 0; i < 300; i++) expect(wide.matching(`tool:t${i}`).length).toBe(3000);
    expect(wide.matching('llm:x').length).toBe(1000);
  });
});
