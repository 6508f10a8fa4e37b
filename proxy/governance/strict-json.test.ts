import { describe, expect, it } from 'vitest';
import { duplicateKey, parseStrictJson } from './strict-json.ts';

describe('strict JSON', () => {
  it('parses JSON without repeated keys', () => {
    expect(parseStrictJson('{"a":{"b":1},"c":[{"b":2},{"b":3}],"d":"{\\"a\\":1,\\"a\\":2}"}')).toEqual({
      ok: true,
      value: { a: { b: 1 }, c: [{ b: 2 }, { b: 3 }], d: '{"a":1,"a":2}' },
    });
  });

  it('finds a key given twice in one object, at any depth, also when spelled with escapes', () => {
    expect(duplicateKey('{"method":"tools/list","method":"tools/call"}')).toBe('method');
    expect(duplicateKey('{"params":{"name":"search","na\\u006de":"delete_repo"}}')).toBe('name');
    expect(duplicateKey('[1,{"a":[{"x":1,"y":{"z":1,"z":2}}]}]')).toBe('z');
    expect(duplicateKey('{"a":"\\"","b":{"a":1},"c":1}')).toBeUndefined();
  });

  it('finds a key given twice up to case, as a server decoding without regard to case reads it', () => {
    expect(duplicateKey('{"method":"ping","Method":"tools/call"}')).toBe('method');
    expect(duplicateKey('{"params":{"name":"read_file","NAME":"delete_repo"}}')).toBe('name');
    // The Kelvin sign folds to k, the long s to s, in Go's encoding/json.
    expect(duplicateKey('{"max_tokens":10,"max_to\u212Aens":100000}')).toBe('max_tokens');
    expect(duplicateKey('{"stream":false,"\u017Ftream":true}')).toBe('stream');
    expect(duplicateKey('{"Model":"a","model_name":"b"}')).toBeUndefined();
  });

  it('refuses nesting deeper than asked, counting arrays and objects alike', () => {
    const nested = (depth: number) => `${'[{"a":'.repeat(depth)}1${'}]'.repeat(depth)}`;
    expect(parseStrictJson(nested(2), { maxDepth: 4 })).toMatchObject({ ok: true });
    expect(parseStrictJson(nested(3), { maxDepth: 4 })).toEqual({
      ok: false,
      reason: 'nested deeper than 4 levels',
      fault: 'depth',
    });
    expect(parseStrictJson(nested(3))).toMatchObject({ ok: true });
    // Brackets inside strings are text, not nesting.
    expect(parseStrictJson('{"a":"[[[[[[[[[["}', { maxDepth: 1 })).toMatchObject({ ok: true });
  });

  it('says why a body was refused', () => {
    expect(parseStrictJson('{"a":1,"a":2}')).toEqual({
      ok: false,
      reason: 'key "a" appears twice in one object (spellings that differ in case count as one)',
      fault: 'duplicate',
    });
    expect(parseStrictJson('\ufeff{}')).toMatchObject({
      ok: false,
      reason: expect.stringContaining('not JSON') as string,
      fault: 'syntax',
    });
  });
});
