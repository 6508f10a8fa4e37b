import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeWellFormed } from '../domain/json-values.ts';
import { decodePayload, encodePayload } from './codec.ts';

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

  it('reads any bytes as TextDecoder reads them: a byte order mark dropped, malformed sequences replaced', () => {
    const reference = (bytes: Uint8Array): unknown => {
      const text = new TextDecoder().decode(bytes);
      return makeWellFormed(JSON.parse(text));
    };
    const outcome = (read: () => unknown): unknown => {
      try {
        return { value: read() };
      } catch (error) {
        return { error: (error as Error).name };
      }
    };
    const bom = [0xef, 0xbb, 0xbf];
    const text = fc.oneof(
      fc.json(),
      fc.string({ unit: 'binary' }).map((s) => JSON.stringify(s)),
    );
    const bytes = fc.oneof(
      fc.tuple(fc.boolean(), text).map(([mark, json]) => [...(mark ? bom : []), ...new TextEncoder().encode(json)]),
      fc.array(fc.constantFrom(0x22, 0x5c, 0x75, 0x41, 0x80, 0xbf, 0xc2, 0xe0, 0xed, 0xef, 0xbb, 0xf0, 0xff), {
        maxLength: 12,
      }),
    );
    fc.assert(
      fc.property(bytes, fc.nat(4), (content, offset) => {
        // A view into a larger buffer, as the in-process bus and the NATS client both hand over.
        const whole = new Uint8Array([...new Array<number>(offset).fill(0x20), ...content]).subarray(offset);
        if (whole.length === 0) return;
        expect(outcome(() => decodePayload(whole))).toEqual(outcome(() => reference(whole)));
        expect(outcome(() => decodePayload(Buffer.from(whole)))).toEqual(outcome(() => reference(whole)));
      }),
      { numRuns: 500 },
    );
    expect(decodePayload(new Uint8Array([...bom, ...new TextEncoder().encode('{"a":1}')]))).toEqual({ a: 1 });
  });
});

describe('encodePayload', () => {
  it("sends the payload's JSON as given rather than encoding the value again, within the same bound", () => {
    const data = { n: 1, s: 'é' };
    const json = JSON.stringify(data);
    expect(Buffer.from(encodePayload(data, 100, json)).toString('utf8')).toBe(json);
    // The text given is what is sent: the value is not encoded again.
    expect(Buffer.from(encodePayload({ other: true }, 100, json)).toString('utf8')).toBe(json);
    expect(() => encodePayload(data, 5, json)).toThrow(/exceeds the 5-byte message limit/);
  });
});
