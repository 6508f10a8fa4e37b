import { describe, expect, it } from 'vitest';
import { BoundedLru } from './bounded-lru.ts';

describe('BoundedLru', () => {
  it('evicts the least recently used entry beyond its capacity', () => {
    const lru = new BoundedLru<string, number>(2);
    lru.set('a', 1);
    lru.set('b', 2);
    expect(lru.get('a')).toBe(1); // a is now the most recent
    lru.set('c', 3);
    expect(lru.size).toBe(2);
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBe(1);
    expect(lru.get('c')).toBe(3);
  });

  it('refuses a capacity below one', () => {
    expect(() => new BoundedLru(0)).toThrow(RangeError);
  });
});
