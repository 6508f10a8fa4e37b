import { describe, expect, it } from 'vitest';
import { decodePayload } from './codec.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

describe('decodePayload', () => {
  it('reads the text as Unicode: malformed UTF-8 and escaped unpaired surrogates both become U+FFFD', () => {
    expect(decodePayload(bytes('{"id":"a\\ud800","\\udc00":["\\ud83d\\ude00"]}'))).toEqual({
      id: 'a\ufffd',
      '\ufffd': ['😀'],
    });
    expect(decodePayload(new Uint8Array([0x22, 0xff, 0x22]))).toBe('\ufffd');
    // An escaped backslash followed by text that looks like an escape is text.
    expect(decodePayload(bytes('"\\\\ud800"'))).toBe('\\ud800');
  });

  it('gives undefined for an empty payload and throws on text that is not JSON', () => {
    expect(decodePayload(new Uint8Array(0))).toBeUndefined();
    expect(() => decodePayload(bytes('{"a":'))).toThrow(SyntaxError);
  });
});
