import { describe, expect, it } from 'vitest';
import { TenantIdSchema } from '../domain/index.ts';
import { inEventStream, patternWithin, subjectMatches, subjectTenantId } from './subjects.ts';

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

describe('patternWithin', () => {
  it.each([
    ['svc.acme.events.llm.call', 'svc.*.events.>', true],
    ['svc.*.events.>', 'svc.*.events.>', true],
    ['svc.acme.events.*', 'svc.*.events.>', true],
    ['svc.*.envelopes.created', 'svc.*.envelopes.>', true],
    ['svc.acme.events', 'svc.*.events.>', false],
    ['svc.acme.>', 'svc.*.events.>', false],
    ['svc.*.*.x', 'svc.*.events.>', false],
    ['svc.acme.leases.request', 'svc.*.events.>', false],
    ['a.b', 'a.b', true],
    ['a.b.c', 'a.b', false],
  ])('%s within %s is %s', (pattern, filter, expected) => {
    expect(patternWithin(pattern, filter)).toBe(expected);
  });

  it('places the spec 6.2 families in the event stream and leases, signals and system subjects outside', () => {
    expect(inEventStream('svc.acme.budgets.exceeded')).toBe(true);
    expect(inEventStream('svc.acme.policies.violation')).toBe(true);
    expect(inEventStream('svc.acme.signals.terminate')).toBe(false);
    expect(inEventStream('svc.system.health')).toBe(false);
  });
});

describe('subjectTenantId', () => {
  /** What the event processor read before: the second token, kept when `TenantIdSchema` takes it. */
  const split = (subject: string) => {
    const tenant = subject.split('.')[1] ?? '';
    return TenantIdSchema.safeParse(tenant).success ? tenant : undefined;
  };

  it.each([
    'svc.acme.events.llm.call',
    'svc.acme',
    'svc.acme.',
    'svc..events',
    'svc',
    '',
    '.acme.x',
    'svc.Ac_m-e9.events',
    'svc.ac me.events',
    'svc.acmé.events',
    'svc.acme*.events',
    `svc.${'a'.repeat(64)}.events`,
    `svc.${'a'.repeat(65)}.events`,
    `svc.${'a'.repeat(64)}`,
    `svc.${'a'.repeat(65)}`,
    'svc.acme\u0000.events',
  ])('reads %j as splitting it and the schema did', (subject) => {
    expect(subjectTenantId(subject)).toBe(split(subject));
  });

  it('agrees with them on random subjects', () => {
    const alphabet = 'aZ09_-.. *>é\u0000';
    for (let n = 0; n < 5_000; n++) {
      let subject = 'svc.';
      const length = Math.floor(Math.random() * 12);
      for (let i = 0; i < length; i++) subject += alphabet[Math.floor(Math.random() * alphabet.length)];
      expect(subjectTenantId(subject), subject).toBe(split(subject));
    }
  });
});
