import { afterEach, describe, expect, it } from 'vitest';
import { tiktokenLoaded } from '../../test/harness/tiktoken-loaded.ts';
import { createTokenCounter, type TokenCounter } from './tokens.ts';

describe("a counter that tokenizes on the thread only (the proxy's)", () => {
  const counters: TokenCounter[] = [];
  const onThread = () => {
    const made = createTokenCounter({ tokenizeOn: 'thread' });
    counters.push(made);
    return made;
  };
  afterEach(() => counters.splice(0).forEach((c) => c.free()));

  // First in the file: nothing here has loaded tiktoken before it.
  it('never loads tiktoken here, and its exact counts of short texts are tiktoken’s', async () => {
    const c = onThread();
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'naïve café, 日本語, 1234', name: 'ann' },
    ];
    const fn = (t: TokenCounter) => () => ({
      chat: t.countChatMessages('gpt-4o', messages),
      text: t.countText('gpt-4', 'hello there, general Kenobi'),
    });
    const counted = await c.exactly(fn(c));
    expect(tiktokenLoaded()).toBe(false);
    // A reader that cannot wait gets the bound: tiktoken is not loaded for it either.
    expect(c.countText('gpt-4o', 'hello there')).toBe(Buffer.byteLength('hello there'));
    expect(c.countIn('cl100k_base', 'hello there')).toBe(Buffer.byteLength('hello there'));
    expect(tiktokenLoaded()).toBe(false);

    const inline = createTokenCounter();
    counters.push(inline);
    const expected = fn(inline)();
    expect(tiktokenLoaded()).toBe(true);
    expect(counted).toEqual(expected);
    // Exact, not the bound.
    expect(expected.text).toBe(6);
  });

  it('keeps the event loop turning while its first count loads the encoder', async () => {
    const c = onThread();
    const order: string[] = [];
    const counting = c.exactly(() => c.countText('gpt-4o', 'hello there')).then((n) => order.push(`count ${n}`));
    await new Promise((resolve) => setImmediate(resolve));
    order.push('loop turned');
    await counting;
    expect(order).toEqual(['loop turned', 'count 2']);
  });
});
