import { describe, expect, it } from 'vitest';
import { MinuteCounts } from './minute-counts.ts';

describe('counts per key and wall-clock minute', () => {
  it('keeps the count of the current minute and of the next, and forgets the rest when the minute turns', () => {
    const counts = new MinuteCounts(10);
    counts.add('a', 100, 2, 100);
    counts.add('a', 101, 5, 100);
    counts.add('a', 99, 7, 100);
    counts.add('a', 102, 11, 100);
    expect(counts.count('a', 100)).toBe(2);
    expect(counts.count('a', 101)).toBe(5);
    counts.add('a', 101, 1, 101);
    expect(counts.count('a', 101)).toBe(6);
    expect(counts.count('a', 103)).toBe(0);
    counts.add('a', 103, 1, 103);
    expect(counts.count('a', 103)).toBe(1);
  });

  it('forgets the least recently counted key beyond its capacity', () => {
    const counts = new MinuteCounts(2);
    for (const key of ['a', 'b', 'a', 'c']) counts.add(key, 1, 1, 1);
    expect([counts.count('a', 1), counts.count('b', 1), counts.count('c', 1)]).toEqual([2, 0, 1]);
  });
});
