import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { createJsonArrayFramer } from './json-array-framer.ts';
import type { Framer } from './sse-framer.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const pushed = (framer: Framer, bytes: Uint8Array) => [...framer.push(bytes)].map(dec).join('');

describe('JSON array framer', () => {
  it('visits each element once it is complete, byte by byte', () => {
    const seen: unknown[] = [];
    const framer = createJsonArrayFramer((e) => {
      seen.push(JSON.parse(e.data));
      return true;
    });
    const text = '[{"a":"br}ace\\"q{"},\r\n{"b":[1,{"c":2}]}\n]';
    let out = '';
    for (const b of enc(text)) out += pushed(framer, Uint8Array.of(b));
    expect(seen).toEqual([{ a: 'br}ace"q{' }, { b: [1, { c: 2 }] }]);
    expect(out).toBe(text);
    expect(framer.closed).toBe(true);
  });

  it('forwards only up to the last complete element, one element per step', () => {
    const framer = createJsonArrayFramer(() => true);
    expect([...framer.push(enc('[{"a":1},\r\n{"b":2},{"c"'))].map(dec)).toEqual(['[{"a":1}', ',\r\n{"b":2}']);
    expect(pushed(framer, enc(':3}'))).toBe(',{"c":3}');
  });

  it('appends an error as the closing element after what was passed on', () => {
    const framer = createJsonArrayFramer(() => true);
    expect(dec(framer.errorFrame(undefined, { error: 1 }))).toBe('[{"error":1}]');
    const shown = pushed(framer, enc('[{"a":1}'));
    expect(JSON.parse(shown + dec(framer.errorFrame(undefined, { error: 1 })))).toEqual([{ a: 1 }, { error: 1 }]);
  });

  it('closes the array validly when the step that triggered a cut was not passed on', () => {
    const framer = createJsonArrayFramer(() => true);
    const steps = framer.push(enc('[{"a":1},{"b":2}'));
    const first = dec(steps.next().value as Uint8Array);
    steps.next(); // the second element is metered, then the caller cuts instead of passing it on
    expect(JSON.parse(first + dec(framer.errorFrame(undefined, { error: 1 })))).toEqual([{ a: 1 }, { error: 1 }]);
  });

  it('refuses an element that grows past the limit with SVC-SYS-9009', () => {
    const framer = createJsonArrayFramer(() => true, 32);
    expect(pushed(framer, enc('[{"a":1}'))).toBe('[{"a":1}');
    let code: string | undefined;
    try {
      for (let i = 0; i < 10; i++) pushed(framer, enc(',{"b":"xxxxxxxxxx'));
    } catch (error) {
      code = isSvcError(error) ? error.code : 'other';
    }
    expect(code).toBe('SVC-SYS-9009');
  });
});
