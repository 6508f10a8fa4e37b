import { describe, expect, it } from 'vitest';
import { makeWellFormed, nestsWithin } from './json-values.ts';

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
