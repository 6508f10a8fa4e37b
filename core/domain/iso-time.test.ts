import { describe, expect, it } from 'vitest';
import { isoTime, parseIsoTime } from './iso-time.ts';

describe('ISO times converted once per distinct value', () => {
  it('formats each date as toISOString does, whichever came before', () => {
    const times = [0, 1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001, 0, -1, 8.64e15];
    for (const time of times) expect(isoTime(new Date(time))).toBe(new Date(time).toISOString());
  });

  it('throws for an invalid date every time, as toISOString does', () => {
    expect(() => isoTime(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => isoTime(new Date(Number.NaN))).toThrow(RangeError);
    expect(isoTime(new Date(5))).toBe('1970-01-01T00:00:00.005Z');
  });

  it('parses each text as Date.parse does, whichever came before', () => {
    const texts = ['2026-11-30T00:00:00.000Z', '2026-11-30T00:00:00.000Z', '2026-12-01T00:00:00Z', 'not a time', ''];
    for (const text of [...texts, ...texts.reverse()]) expect(parseIsoTime(text)).toBe(Date.parse(text));
  });
});
