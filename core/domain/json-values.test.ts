import { describe, expect, it } from 'vitest';
import { makeWellFormed, nestsWithin, wellFormedCopy } from './json-values.ts';

/** A value nested `depth` levels (the outer object being the first), built as text so nothing recurses. */
const nested = (depth: number): unknown => JSON.parse(`{"a":${'['.repeat(depth - 1)}1${']'.repeat(depth - 1)}}`);

describe('nestsWithin', () => {
  it('counts the value itself as the first level and scalars as none', () => {
    expect(nestsWithin('text', 0)).toBe(true);
    expect(nestsWithin({}, 1)).toBe(true);
    expect(nestsWithin({ a: { b: [1] } }, 3)).toBe(true);
    expect(nestsWithin({ a: { b: [1] } }, 2)).toBe(false);
    expect(nestsWithin(nested(32), 32)).toBe(true);
    expect(nestsWithin(nested(33), 32)).toBe(false);
  });

  it('walks any depth without recursion', () => {
    expect(nestsWithin(nested(200_000), 32)).toBe(false);
    expect(nestsWithin(nested(200_000), 300_000)).toBe(true);
  });
});

describe('makeWellFormed', () => {
  it('replaces unpaired surrogates in strings and keys, and keeps pairs', () => {
    const value = JSON.parse('{"a\\ud800":["x\\udfff",{"k":"\\ud83d\\ude00 \\ud83d"}],"n":1,"__proto__":"p\\udc00"}');
    const cleaned = makeWellFormed(value) as Record<string, unknown>;
    expect(cleaned).toBe(value);
    expect(Object.keys(cleaned).sort()).toEqual(['__proto__', 'a\ufffd', 'n']);
    expect(cleaned['a\ufffd']).toEqual(['x\ufffd', { k: '😀 \ufffd' }]);
    expect(Object.getOwnPropertyDescriptor(cleaned, '__proto__')?.value).toBe('p\ufffd');
    expect(Object.getPrototypeOf(cleaned)).toBe(Object.prototype);
    expect(makeWellFormed('\ud800')).toBe('\ufffd');
    expect(makeWellFormed(null)).toBe(null);
  });

  it('walks any depth without recursion', () => {
    const deep = JSON.parse(`${'['.repeat(200_000)}"\\ud800"${']'.repeat(200_000)}`) as unknown;
    let node = makeWellFormed(deep);
    while (Array.isArray(node)) node = node[0];
    expect(node).toBe('\ufffd');
  });
});

describe('wellFormedCopy', () => {
  const samples = (): unknown[] => [
    JSON.parse('{"a\\ud800":["x\\udfff",{"k":"\\ud83d\\ude00 \\ud83d"}],"n":1,"z":null,"__proto__":"p\\udc00"}'),
    JSON.parse('{"b\\udc00":1,"b\\ufffd":2,"c":3}'),
    { at: new Date(0), map: new Map([['k\ud800', 'v']]), big: 1n, flag: true, none: undefined },
    // eslint-disable-next-line no-sparse-arrays
    Object.assign([1, , '\ud800'], { extra: 'e\udfff' }),
    Object.assign(Object.create(null) as object, { n: 'x' }),
    '\ud800',
    7,
    null,
  ];

  it('gives what cleaning a structured clone gives, keys in the same order, and leaves the input as it was', () => {
    const inputs = samples();
    const untouched = samples();
    for (const [i, input] of inputs.entries()) {
      const copy = wellFormedCopy(input);
      const expected = makeWellFormed(structuredClone(untouched[i]));
      expect(copy).toStrictEqual(expected);
      if (typeof copy === 'object' && copy !== null) {
        expect(copy).not.toBe(input);
        expect(Object.keys(copy)).toEqual(Object.keys(expected as object));
      }
      expect(input).toStrictEqual(untouched[i]);
    }
    const cleaned = wellFormedCopy(inputs[0]) as Record<string, unknown>;
    expect(Object.getOwnPropertyDescriptor(cleaned, '__proto__')?.value).toBe('p\ufffd');
    expect(Object.getPrototypeOf(cleaned)).toBe(Object.prototype);
  });

  it('copies every level, so later changes to the input do not reach the copy', () => {
    const input = { actor: { id: 'a' }, list: [{ n: 1 }] };
    const copy = wellFormedCopy(input);
    input.actor.id = 'changed';
    input.list[0]!.n = 2;
    expect(copy).toEqual({ actor: { id: 'a' }, list: [{ n: 1 }] });
  });

  it('refuses a function as structuredClone does', () => {
    expect(() => wellFormedCopy({ f: () => 1 })).toThrow(DOMException);
  });

  it('walks any depth without recursion', () => {
    const deep = JSON.parse(`${'['.repeat(200_000)}"\\ud800"${']'.repeat(200_000)}`) as unknown;
    let node = wellFormedCopy(deep);
    while (Array.isArray(node)) node = node[0];
    expect(node).toBe('\ufffd');
  });
});
