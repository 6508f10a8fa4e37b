import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import { canonicalTime, TimestampSchema } from './timestamp.ts';

const parse = (iso: string) => TimestampSchema.parse(iso);

describe('timestamps in one canonical form', () => {
  it('takes a canonical time as it is', () => {
    for (const iso of ['2026-12-02T00:44:21.123Z', '0000-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z'])
      expect(parse(iso)).toBe(iso);
  });

  it('converts an offset to UTC, whichever side of midnight and of the year it falls', () => {
    expect(parse('2026-01-01T01:00:00+01:00')).toBe('2026-01-01T00:00:00.000Z');
    expect(parse('2026-01-01T00:30:00+05:30')).toBe('2025-12-31T19:00:00.000Z');
    expect(parse('2025-12-31T23:00:00-02:00')).toBe('2026-01-01T01:00:00.000Z');
    expect(parse('2026-01-01T00:00:00+00:00')).toBe('2026-01-01T00:00:00.000Z');
    expect(parse('2026-01-01T00:00:00-00:00')).toBe('2026-01-01T00:00:00.000Z');
  });

  it('writes exactly three digits of a second, padding fewer and cutting more, never rounding up', () => {
    expect(parse('2026-01-01T00:00:00Z')).toBe('2026-01-01T00:00:00.000Z');
    expect(parse('2026-01-01T00:00:00.5Z')).toBe('2026-01-01T00:00:00.500Z');
    expect(parse('2026-01-01T00:00:00.12Z')).toBe('2026-01-01T00:00:00.120Z');
    expect(parse('2026-12-31T23:59:59.999999999Z')).toBe('2026-12-31T23:59:59.999Z');
    expect(parse('2026-01-01T00:00:00.123987654+01:00')).toBe('2025-12-31T23:00:00.123Z');
  });

  it('puts two spellings of one instant at one text, so text order is time order', () => {
    const spellings = ['2026-01-01T01:00:00+01:00', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00.000000Z'];
    expect(new Set(spellings.map(parse)).size).toBe(1);
    const later = parse('2026-01-01T00:30:00.001+00:30');
    const earlier = parse('2026-01-01T00:00:00.000Z');
    expect(later > earlier).toBe(true);
    expect(parse('2026-01-01T00:59:00+01:00') < parse('2026-01-01T00:00:00.001Z')).toBe(true);
  });

  it('refuses a time whose year leaves 0000-9999 once in UTC, naming the field', () => {
    for (const iso of ['9999-12-31T23:30:00-01:00', '0000-01-01T00:30:00+01:00']) {
      expect(TimestampSchema.safeParse(iso).success).toBe(false);
      let refusal: unknown;
      try {
        parseOrThrow(z.object({ expires_at: TimestampSchema }), { expires_at: iso });
      } catch (error) {
        refusal = error;
      }
      expect(refusal).toBeInstanceOf(SvcError);
      expect(refusal).toMatchObject({
        code: 'SVC-SYS-9002',
        fieldViolations: [{ field: 'expires_at', description: expect.stringContaining('0000 to 9999') }],
      });
    }
    expect(parse('0000-01-01T00:30:00-01:00')).toBe('0000-01-01T01:30:00.000Z');
    expect(parse('9999-12-31T23:30:00+01:00')).toBe('9999-12-31T22:30:00.000Z');
  });

  it('still refuses what is no date-time, or finer than nanoseconds, with one reason each', () => {
    for (const iso of ['yesterday', '2026-02-29T00:00:00Z', '2026-01-01T00:00:00', '2026-01-01T00:00:00+0100']) {
      const result = TimestampSchema.safeParse(iso);
      expect(result.error?.issues).toHaveLength(1);
    }
    expect(TimestampSchema.safeParse('2026-01-01T00:00:00.1234567890Z').error?.issues[0]?.message).toContain(
      '9 digits',
    );
  });

  it('gives text that is no date-time back as it was', () => {
    expect(canonicalTime('not a time')).toBe('not a time');
  });

  it('stays a string schema, so JSON schemas made from it still say date-time', () => {
    expect(z.toJSONSchema(TimestampSchema)).toMatchObject({ type: 'string', format: 'date-time' });
  });
});
