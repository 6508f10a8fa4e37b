import { afterEach, describe, expect, it } from 'vitest';
import { failure } from '../../test/harness/failure.ts';
import { createTokenThread, type TextToCount, type TokenThread } from './token-thread.ts';
import { createTokenCounter, type TokenCounter } from './tokens.ts';

const prose = (chars: number) =>
  'Governed calls, naïve café, 日本語, 1234 — '.repeat(Math.ceil(chars / 40)).slice(0, chars);

describe('exactly', () => {
  const counters: TokenCounter[] = [];
  const counter = (options: Parameters<typeof createTokenCounter>[0] = {}) => {
    const made = createTokenCounter(options);
    counters.push(made);
    return made;
  };
  afterEach(() => counters.splice(0).forEach((c) => c.free()));

  it('gives what the function gives with exact counts, on the thread for large texts', async () => {
    const inline = counter({ offThreadMinChars: Number.POSITIVE_INFINITY });
    let threads = 0;
    const threaded = counter({
      offThreadMinChars: 1000,
      createThread: () => {
        threads++;
        return createTokenThread();
      },
    });
    const messages = [
      { role: 'system', content: prose(3000) },
      { role: 'user', content: prose(500), name: 'ann' },
    ];
    const fn = (c: TokenCounter) => () => ({
      chat: c.countChatMessages('gpt-4o', messages),
      text: c.countText('gpt-4', prose(1200)),
    });
    const expected = fn(inline)();
    expect(expected.chat).toBeLessThan(3500);
    expect(await threaded.exactly(fn(threaded))).toEqual(expected);
    expect(threads).toBe(1);
    // Small texts are counted in place: no thread is started for them.
    const small = counter({ offThreadMinChars: 1000, createThread: () => expect.unreachable() });
    expect(await small.exactly(() => small.countText('gpt-4o', 'hello there'))).toBe(2);
  });

  it('counts in place when the thread fails, never skipping a count', async () => {
    const failing: TokenThread = {
      count: () => Promise.reject(new Error('thread died')),
      close: () => Promise.resolve(),
    };
    const inline = counter({ offThreadMinChars: Number.POSITIVE_INFINITY });
    const c = counter({ offThreadMinChars: 10, createThread: () => failing });
    const text = prose(5000);
    expect(await c.exactly(() => c.countText('gpt-4o', text))).toBe(inline.countText('gpt-4o', text));
    // One that tokenizes on the thread only counts here exactly too, short texts as long ones, not by their bound.
    const onThread = counter({ tokenizeOn: 'thread', createThread: () => failing });
    for (const t of [prose(20), text])
      expect(await onThread.exactly(() => onThread.countText('gpt-4o', t))).toBe(inline.countText('gpt-4o', t));
  });

  it('counts a text the second run asks for and the first did not', async () => {
    const inline = counter({ offThreadMinChars: Number.POSITIVE_INFINITY });
    const c = counter({ offThreadMinChars: 10 });
    let run = 0;
    // A function that (wrongly) asks for other texts on its second run still gets exact counts.
    const fn = () => c.countText('gpt-4o', run++ === 0 ? prose(100) : prose(200));
    expect(await c.exactly(fn)).toBe(inline.countText('gpt-4o', prose(200)));
  });
});

describe('createTokenThread', () => {
  it('whose entry is missing, fails once, logged once, then is not started again until the back-off ends', async () => {
    let clock = 0;
    const logged: { fields: unknown; message: string }[] = [];
    const broken = createTokenThread({
      entry: new URL('./no-such-token-thread.ts', import.meta.url),
      retryMs: 60_000,
      now: () => clock,
      logger: { error: (fields, message) => void logged.push({ fields, message }) },
    });
    const texts: TextToCount[] = [{ encoding: 'o200k_base', text: 'hello' }];
    const started = (await failure(() => broken.count(texts))) as Error;
    expect(started.message).toMatch(/no-such-token-thread/);
    // Within the back-off: refused at once, naming why, without a thread started for it.
    clock = 59_999;
    const refused = (await failure(() => broken.count(texts))) as Error;
    expect(refused.message).toBe(`token thread not started again yet: ${started.message}`);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toEqual({
      fields: { err: started.message, retry_ms: 60_000 },
      message: 'token thread failed; exact counts are made on the event loop until it starts again',
    });
    // After it: started again, and failing the same, not logged again.
    clock = 60_000;
    const again = (await failure(() => broken.count(texts))) as Error;
    expect(again.message).toBe(started.message);
    expect(logged).toHaveLength(1);
    await broken.close();
  });

  it('whose thread is refused at once rejects the count rather than throw, and backs off the same', async () => {
    const logged: unknown[] = [];
    const refusing = createTokenThread({
      entry: new URL('https://example.com/token-thread.js'),
      logger: { error: (fields) => void logged.push(fields) },
    });
    const texts: TextToCount[] = [{ encoding: 'o200k_base', text: 'hello' }];
    const count = refusing.count(texts);
    await expect(count).rejects.toThrow(/scheme file/);
    await expect(refusing.count(texts)).rejects.toThrow(/not started again yet/);
    expect(logged).toHaveLength(1);
    await refusing.close();
  });

  it('whose thread fails is counted on the loop meanwhile, exactly, by the counter', async () => {
    const inline = createTokenCounter();
    const counter = createTokenCounter({
      tokenizeOn: 'thread',
      createThread: () => createTokenThread({ entry: new URL('./no-such-token-thread.ts', import.meta.url) }),
    });
    try {
      for (const text of [prose(20), prose(300)])
        expect(await counter.exactly(() => counter.countText('gpt-4o', text))).toBe(inline.countText('gpt-4o', text));
    } finally {
      inline.free();
      counter.free();
    }
  });

  it('answers counts in flight together and in order', async () => {
    const thread = createTokenThread();
    const inline = createTokenCounter();
    try {
      const batches = [prose(100), prose(3000), prose(10)].map((text) => [{ encoding: 'cl100k_base' as const, text }]);
      const counts = await Promise.all(batches.map((texts) => thread.count(texts)));
      expect(counts).toEqual(batches.map(([t]) => [inline.countIn(t!.encoding, t!.text)]));
    } finally {
      inline.free();
      await thread.close();
    }
    await expect(thread.count([{ encoding: 'cl100k_base', text: 'x' }])).resolves.toEqual([1]);
    await thread.close();
  });
});
