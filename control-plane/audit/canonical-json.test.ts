import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.ts';

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
  });
});

const PINNED = '6dbf40b033fc62e65b3f293751fa9048899724c6471537a114ff0fd44983fe68';
