import { describe, expect, it } from 'vitest';
import { assertEventSubject, assertKey, assertName, assertPattern } from './names.ts';

describe('name checks', () => {
  it('accepts well-formed keys, patterns and names', () => {
    expect(() => assertKey('budget.acme.b-1')).not.toThrow();
    expect(() => assertPattern('svc.*.events.>')).not.toThrow();
    expect(() => assertName('durable', 'event-processor_1')).not.toThrow();
    expect(() => assertEventSubject('subject', 'svc.acme.events.llm.call')).not.toThrow();
  });

  it.each([
    [() => assertKey('budget:acme'), 'key'],
    [() => assertKey('budget..acme'), 'key'],
    [() => assertKey('budget.acme.'), 'key'],
    [() => assertPattern('svc.>.events'), 'pattern'],
    [() => assertPattern('svc. .x', 'filter'), 'filter'],
    [() => assertName('bucket', 'svc.rulesets'), 'bucket'],
    [() => assertEventSubject('subject', 'svc.acme.events.>'), 'subject'],
    [() => assertEventSubject('pattern', 'svc.>'), 'pattern'],
  ])('refuses a bad value with SVC-SYS-9002 naming %#', (check, field) => {
    expect(check).toThrow(
      expect.objectContaining({ code: 'SVC-SYS-9002', fieldViolations: [expect.objectContaining({ field })] }) as Error,
    );
  });
});

describe('assertEventSubject over many subjects', () => {
  it('answers the same for a subject checked before, past the bound of the subjects it remembers', () => {
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 5_000; i++)
        expect(() => assertEventSubject('subject', `svc.t${i}.events.llm.call`)).not.toThrow();
      // Valid as a pattern does not make it valid as a subject, nor the other way round.
      expect(() => assertEventSubject('pattern', 'svc.*.events.>')).not.toThrow();
      expect(() => assertEventSubject('subject', 'svc.*.events.>')).toThrow(/invalid subject/);
      expect(() => assertEventSubject('subject', 'svc.t1.signals.terminate')).toThrow(/must lie within/);
    }
  });
});
