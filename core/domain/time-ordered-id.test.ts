import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { timeOrderedUuid } from './time-ordered-id.ts';

describe('timeOrderedUuid', () => {
  it('is a version 7 UUID whose order follows the time it was made at', () => {
    const times = [0, 1, 999, 1_700_000_000_000, 1_700_000_000_001, 4_102_444_800_000];
    const ids = times.map((t) => timeOrderedUuid(new Date(t)));
    for (const id of ids) {
      expect(z.uuid().safeParse(id).success, id).toBe(true);
      expect(id[14]).toBe('7');
      expect('89ab').toContain(id[19]);
    }
    expect([...ids].sort()).toEqual(ids);
    expect(ids[3]!.replaceAll('-', '').slice(0, 12)).toBe((1_700_000_000_000).toString(16).padStart(12, '0'));
    expect(timeOrderedUuid(new Date(5))).not.toBe(timeOrderedUuid(new Date(5)));
  });
});
