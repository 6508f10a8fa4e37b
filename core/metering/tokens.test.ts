import { get_encoding, Tiktoken } from 'tiktoken';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createTokenCounter, encodingForModel } from './tokens.ts';

const counter = createTokenCounter({ memoMinChars: 1000 });
afterAll(() => counter.free());

describe('encoding per model family', () => {
  it.each([
    ['gpt-4o-2024-08-06', 'o200k_base'],
    ['gpt-4.1-mini', 'o200k_base'],
    ['o3-mini', 'o200k_base'],
    ['o4-mini', 'o200k_base'],
    ['gpt-4-turbo', 'cl100k_base'],
    ['gpt-3.5-turbo', 'cl100k_base'],
    ['text-embedding-3-small', 'cl100k_base'],
    ['claude-sonnet-4-20250514', 'cl100k_base'],
    ['models/gemini-2.5-flash', 'cl100k_base'],
  ])('%s uses %s', (model, encoding) => {
    expect(encodingForModel(model)).toBe(encoding);
  });
});

describe('countText', () => {
  it('matches tiktoken for known strings', () => {
    const o200k = get_encoding('o200k_base');
    const cl100k = get_encoding('cl100k_base');
    for (const text of ['hello world', 'Ünïcödé ✓ 漢字 and emoji 🎉', 'function add(a, b) { return a + b; }']) {
      expect(counter.countText('gpt-4o', text)).toBe(o200k.encode(text).length);
      expect(counter.countText('gpt-4', text)).toBe(cl100k.encode(text).length);
    }
    o200k.free();
    cl100k.free();
  });

  it('counts the well-known example', () => {
    expect(counter.countText('gpt-4', 'tiktoken is great!')).toBe(6);
    expect(counter.countText('gpt-4o', '')).toBe(0);
  });

  it('treats special-token text in user input as plain text', () => {
    expect(counter.countText('gpt-4o', 'a <|endoftext|> b')).toBeGreaterThan(3);
  });

  it('counts a long run of one character class as tiktoken does, in time that grows with its length alone', () => {
    const o200k = get_encoding('o200k_base');
    // Languages written without spaces, a run of symbols, of white space: each one piece to the
    // pre-tokenizer. Short enough here for tiktoken alone to count them quickly.
    for (const text of [
      '漢字かなカナ、日本語の文章です。'.repeat(300),
      `prefix ${'-'.repeat(3_000)} suffix`,
      `a${' '.repeat(2_000)}b`,
      'x'.repeat(5_000),
    ])
      expect(counter.countText('gpt-4o', text)).toBe(o200k.encode_ordinary(text).length);
    o200k.free();
  });

  it('never hands the tokenizer a long run whole, whose merging is quadratic in its length', () => {
    // Encoded as one piece, 400,000 of one letter took about two minutes of CPU, 50,000
    // characters of Japanese 14 s. A piece longer than two slices fails here at once.
    const encode = Object.getOwnPropertyDescriptor(Tiktoken.prototype, 'encode_ordinary')?.value as (
      this: Tiktoken,
      text: string,
    ) => Uint32Array;
    const spy = vi.spyOn(Tiktoken.prototype, 'encode_ordinary').mockImplementation(function (this: Tiktoken, text) {
      if (text.length > 512) throw new Error(`the tokenizer got a piece of ${text.length} characters`);
      return encode.call(this, text);
    });
    try {
      expect(counter.countText('gpt-4o', 'a'.repeat(400_000))).toBe(50_000);
      expect(counter.countText('gpt-4o', '漢字かなカナ'.repeat(16_000))).toBeGreaterThan(16_000);
      expect(counter.countText('gpt-4o', `${'['.repeat(100_000)}${' '.repeat(100_000)}`)).toBeGreaterThan(0);
    } finally {
      spy.mockRestore();
    }
  });

  it('counts a run of ten million letters, longer than a backtracking regex can follow', () => {
    // A `{256,}` overflowed V8's stack from about five million characters of any of the classes.
    expect(counter.countText('gpt-4o', 'a'.repeat(10_000_000))).toBe(1_250_000);
  });

  it('does not tokenize the same large text twice', () => {
    const spy = vi.spyOn(Tiktoken.prototype, 'encode_ordinary');
    const big = 'lorem ipsum dolor sit amet '.repeat(200);
    const first = counter.countText('gpt-4o', big);
    const second = counter.countText('gpt-4o', big);
    expect(second).toBe(first);
    expect(spy).toHaveBeenCalledTimes(1);
    spy.mockRestore();
  });
});

describe('countChatMessages', () => {
  it('adds OpenAI per-message framing', () => {
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say hi', name: 'bob' },
    ];
    const text = (s: string) => counter.countText('gpt-4o', s);
    const expected =
      3 + (3 + text('system') + text('You are terse.')) + (3 + text('user') + text('Say hi') + 1 + text('bob'));
    expect(counter.countChatMessages('gpt-4o', messages)).toBe(expected);
  });
});

describe('the upper bound', () => {
  const texts = [
    'hello world',
    'Grüße aus Köln — naïve café',
    '日本語のテキストとemoji 🎉🎉 mixed in',
    '    indented\n\tcode();\n',
    'a'.repeat(5000),
    Array.from({ length: 300 }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20000))).join(''),
  ];

  it.each(['gpt-4o', 'gpt-4-turbo'])('is never below the exact count, text or chat (%s)', (model) => {
    for (const text of texts) {
      const bound = counter.bounded(() => counter.countText(model, text));
      expect(bound).toBe(Buffer.byteLength(text));
      expect(bound).toBeGreaterThanOrEqual(counter.countText(model, text));
    }
    const messages = texts.map((content, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content }));
    expect(counter.bounded(() => counter.countChatMessages(model, messages))).toBeGreaterThanOrEqual(
      counter.countChatMessages(model, messages),
    );
  });

  it('runs no tokenizer and ends with its scope, also when the scope throws', () => {
    const encode = vi.spyOn(Tiktoken.prototype, 'encode_ordinary');
    counter.bounded(() => counter.countText('gpt-4o', 'no tokenizer here'));
    expect(encode).not.toHaveBeenCalled();
    expect(() =>
      counter.bounded(() => {
        throw new Error('parse failed');
      }),
    ).toThrow('parse failed');
    counter.countText('gpt-4o', 'exact again');
    expect(encode).toHaveBeenCalled();
    encode.mockRestore();
  });
});
