import { describe, expect, it } from 'vitest';
import { subjectMatches } from './subjects.ts';

describe('subjectMatches, as NATS matches subjects', () => {
  it.each([
    ['svc.*.events.>', 'svc.acme.events.llm.call', true],
    ['svc.*.events.>', 'svc.acme.events.tool', true],
    ['svc.*.events.>', 'svc.acme.events', false],
    ['svc.*.events.>', 'svc.acme.envelopes.created', false],
    ['svc.*.envelopes.created', 'svc.acme.envelopes.created', true],
    ['svc.*.envelopes.created', 'svc.acme.envelopes.created.x', false],
    ['svc.*.envelopes.created', 'svc.acme.envelopes.create', false],
    ['svc.*.envelopes.created', 'svc.acme.envelopes.createdd', false],
    ['svc.*.envelopes.created', 'svc.acme.envelopes', false],
    ['svc.acme.>', 'svc.globex.events.llm', false],
    ['svc.acme.>', 'svc.acme.x', true],
    ['svc.acme.>', 'svc.acme', false],
    ['>', 'anything.at.all', true],
    ['*', 'one', true],
    ['*', 'one.two', false],
    ['a.*.c', 'a..c', true],
    ['a.b', 'a.b', true],
    ['a.b', 'a.bc', false],
    ['ab.c', 'a.c', false],
    ['a.b.c', 'a.b', false],
    ['rulesets.*', 'rulesets.acme', true],
  ])('%s against %s: %s', (pattern, subject, matches) => {
    expect(subjectMatches(pattern, subject)).toBe(matches);
  });
});
