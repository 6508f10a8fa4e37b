import { describe, expect, it } from 'vitest';
import { BoundedMemo } from './bounded-memo.ts';

describe('BoundedMemo', () => {
  it('answers each key once while it is remembered', () => {
    const asked: string[] = [];
    const memo = new BoundedMemo(4, (key: string) => {
      asked.push(key);
      return key.length;
    });
    expect([memo.get('a'), memo.get('bb'), memo.get('a'), memo.get('bb')]).toEqual([1, 2, 1, 2]);
    expect(asked).toEqual(['a', 'bb']);
  });

  it('holds no more than its limit, forgetting the oldest key first', () => {
    const asked: number[] = [];
    const memo = new BoundedMemo(3, (key: number) => {
      asked.push(key);
      return key * 2;
    });
    for (let key = 0; key < 1000; key++) expect(memo.get(key)).toBe(key * 2);
    expect(memo.size).toBe(3);
    asked.length = 0;
    // The last three are remembered; the first is asked again, and pushes out the oldest of them.
    expect([memo.get(997), memo.get(998), memo.get(999)]).toEqual([1994, 1996, 1998]);
    expect(asked).toEqual([]);
    expect(memo.get(0)).toBe(0);
    expect(memo.get(998)).toBe(1996);
    expect(asked).toEqual([0]);
    expect(memo.get(997)).toBe(1994);
    expect(asked).toEqual([0, 997]);
    expect(memo.size).toBe(3);
  });

  it('remembers a null answer as one', () => {
    let asked = 0;
    const memo = new BoundedMemo(2, () => {
      asked++;
      return null;
    });
    expect([memo.get('x'), memo.get('x')]).toEqual([null, null]);
    expect(asked).toBe(1);
  });

  it('forgets everything when cleared, and refuses a limit below one', () => {
    const memo = new BoundedMemo(2, (key: string) => key);
    memo.get('a');
    memo.clear();
    expect(memo.size).toBe(0);
    expect(() => new BoundedMemo(0, (key: string) => key)).toThrow(RangeError);
  });
});
