import { describe, expect, it } from 'vitest';
import { createJsonArrayFramer } from './json-array-framer.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe('JSON array framer', () => {
  it('visits each element once it is complete, byte by byte', () => {
    const seen: unknown[] = [];
    const framer = createJsonArrayFramer((e) => {
      seen.push(JSON.parse(e.data));
      return true;
    });
    const text = '[{"a":"br}ace\\"q{"},\r\n{"b":[1,{"c":2}]}\n]';
    let out = '';
    for (const b of enc(text)) out += dec(framer.push(Uint8Array.of(b)));
    expect(seen).toEqual([{ a: 'br}ace"q{' }, { b: [1, { c: 2 }] }]);
    expect(out).toBe(text);
    expect(framer.closed).toBe(true);
  });

  it('forwards only up to the last complete element', () => {
    const framer = createJsonArrayFramer(() => true);
    expect(dec(framer.push(enc('[{"a":1},\r\n{"b"')))).toBe('[{"a":1}');
    expect(dec(framer.push(enc(':2}')))).toBe(',\r\n{"b":2}');
  });

  it('appends an error as the closing element', () => {
    const framer = createJsonArrayFramer(() => true);
    expect(dec(framer.errorFrame(undefined, { error: 1 }))).toBe('[{"error":1}]');
    framer.push(enc('[{"a":1}'));
    const all = '[{"a":1}' + dec(framer.errorFrame(undefined, { error: 1 }));
    expect(JSON.parse(all)).toEqual([{ a: 1 }, { error: 1 }]);
  });
});
