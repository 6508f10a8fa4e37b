import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalJsonBytes } from './canonical-json.ts';

describe('canonical JSON', () => {
  it('sorts keys at every level by code unit, drops undefined members and keeps array order', () => {
    const value = {
      b: [3, { z: 1, a: undefined, Z: [null, undefined, 'x'] }],
      a: 'é\u{1F600}"\n',
      '\u{FF21}': 1,
      // Before U+FF21 by code unit (a surrogate pair), after it by code point.
      '\u{1F600}': 2,
      B: { y: true, x: -0.5 },
      u: undefined,
    };
    expect(canonicalJson(value)).toBe(
      '{"B":{"x":-0.5,"y":true},"a":"é\u{1F600}\\"\\n","b":[3,{"Z":[null,null,"x"],"z":1}],"\u{1F600}":2,"\u{FF21}":1}',
    );
    expect(canonicalJson({})).toBe('{}');
    expect(canonicalJson([])).toBe('[]');
    expect(canonicalJson({ a: undefined })).toBe('{}');
  });

  it('hashes a record to the value chained records were sealed with', () => {
    // An audit record's shape; the digest pins the text every stored chain was hashed over.
    const record = {
      audit_id: '4f1c2b8e-0d6a-4c5e-9b1f-3a7d2e6c8b90',
      seq: 7,
      timestamp: '2026-11-29T08:00:00.000Z',
      tenant_id: 'acme',
      actor: { type: 'api_key', id: 'k1' },
      action: 'envelope.create',
      resource: { type: 'envelope', id: 'e1' },
      result: 'success',
      metadata: { budget_id: 'b1', tags: ['x', 'y'] },
      prev_hash: '0'.repeat(64),
    };
    const digest = createHash('sha256').update(canonicalJson(record)).digest('hex');
    expect(digest).toBe(PINNED);
    expect(createHash('sha256').update(canonicalJsonBytes(record)).digest('hex')).toBe(PINNED);
  });

  it('gives the bytes of the text as chained records defined it, for any value', () => {
    fc.assert(
      fc.property(fc.oneof(anyValue, wideObject), (value) => {
        const text = firstDefinition(value);
        expect(canonicalJson(value)).toBe(text);
        expect(Buffer.from(canonicalJsonBytes(value))).toEqual(Buffer.from(text, 'utf8'));
      }),
      { numRuns: 1_000 },
    );
  });

  it('writes a text larger than its buffer, then a small one, whole', () => {
    const large = { a: 'x'.repeat(100_000), b: ['é'.repeat(30_000)] };
    expect(canonicalJson(large)).toBe(firstDefinition(large));
    expect(canonicalJson({ z: 1, a: [2] })).toBe('{"a":[2],"z":1}');
  });
});

/** The text as chained records were first hashed over (a string built member by member). */
function firstDefinition(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return '[' + value.map((item) => firstDefinition(item)).join(',') + ']';
  const record = value as Record<string, unknown>;
  const members = Object.keys(record)
    .sort()
    .filter((key) => record[key] !== undefined)
    .map((key) => JSON.stringify(key) + ':' + firstDefinition(record[key]));
  return '{' + members.join(',') + '}';
}

/** Any UTF-16 code unit: quotes, controls, lone and paired surrogates, U+2028 included. */
const anyText = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)) });

const anyValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    anyText,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.array(tie('value')),
    fc.dictionary(fc.oneof(anyText, fc.string()), tie('value')),
  ),
})).value;

// Past 32 keys an object is sorted another way.
const wideObject = fc.dictionary(fc.oneof(anyText, fc.string()), anyValue, { minKeys: 33, maxKeys: 40 });

const PINNED = '6dbf40b033fc62e65b3f293751fa9048899724c6471537a114ff0fd44983fe68';
