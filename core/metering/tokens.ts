import { createRequire } from 'node:module';
import type * as TiktokenModule from 'tiktoken';
import type { Tiktoken } from 'tiktoken';
import { BoundedMemo } from '../resilience/bounded-memo.ts';
import { normalizeModelId } from './prices.ts';
import { createTokenThread, type TextToCount, type TokenThread, type TokenThreadLogger } from './token-thread.ts';

export type EncodingName = 'o200k_base' | 'cl100k_base';

/** One chat turn reduced to the text that is tokenized. */
export interface ChatMessageText {
  role: string;
  content: string;
  name?: string | undefined;
}

export interface TokenCounter {
  encodingFor(model: string): EncodingName;
  countText(model: string, text: string): number;
  /** Prompt tokens of a chat request, with OpenAI's per-message framing overhead. */
  countChatMessages(model: string, messages: readonly ChatMessageText[]): number;
  /**
   * Runs `fn` (synchronous) with every count replaced by the text's UTF-8 byte length, framing
   * kept: an upper bound of the exact count at no tokenizer cost, since every token of a
   * byte-level BPE encoding covers at least one byte.
   */
  bounded<T>(fn: () => T): T;
  /**
   * The texts `fn` (synchronous, free of side effects) counts, in the order it counts them, each
   * count answered with its bound as `bounded` does: the text of a request as its adapter reads
   * it. Framing (a chat message's role) is not among them.
   */
  texts(fn: () => unknown): string[];
  /**
   * Resolves with what `fn` returns when every count in it is exact. `fn` must be synchronous and
   * free of side effects: it runs once to learn which texts it counts and once more with their
   * counts. When those texts reach `offThreadMinChars` in all (any text, when `tokenizeOn` is
   * 'thread'), they are tokenized on a worker thread, so a large prompt does not stall every other
   * call on the event loop; should the thread fail, they are counted here instead, exactly (a
   * count is never skipped nor left a bound).
   */
  exactly<T>(fn: () => T): Promise<T>;
  /** A text's exact count in a named encoding (its bound when `tokenizeOn` is 'thread'). */
  countIn(encoding: EncodingName, text: string): number;
  /** Releases the WASM encoders and stops the worker thread (both are created again on next use). */
  free(): void;
}

export interface TokenCounterOptions {
  /** Texts at least this long are remembered, so one large prompt is never tokenized twice. */
  memoMinChars?: number;
  memoEntries?: number;
  /**
   * `exactly` tokenizes on a worker thread from this many characters on (Infinity: never). Below
   * it the thread's round trip costs about what the count does.
   */
  offThreadMinChars?: number;
  /** Starts the thread `exactly` counts on. */
  createThread?: () => TokenThread;
  /** Told when the thread `createThread` makes by default fails (`createTokenThread`). */
  logger?: TokenThreadLogger;
  /**
   * 'here' (the default): texts are tokenized on this thread, `exactly` moving large ones to the
   * worker thread. 'thread': this thread never loads tiktoken while the worker thread can count,
   * since loading it here (its WebAssembly and an encoder: about 1 s of CPU under load) stalls
   * every call in flight: `exactly` counts every text there, whatever its length, and a count
   * asked for outside `exactly` (a reader that cannot wait) is answered with its bound.
   */
  tokenizeOn?: 'here' | 'thread';
}

// OpenAI's documented framing: every message costs 3 tokens, a name 1 more, and the reply is primed with 3.
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_NAME = 1;
const REPLY_PRIMER = 3;

const ENCODING_MEMO_LIMIT = 256;

/**
 * A run of 256 characters or more of one class that the encodings' pre-tokenizers keep as one
 * piece: letters and marks (a language written without spaces, or one letter repeated), symbols
 * and punctuation, white space. Byte-pair merging is quadratic in a piece's length: 50,000
 * characters of Japanese took 14 s of CPU, 100,000 of one bracket 17 s. A lookbehind starts a
 * match only where a run starts, so finding them is linear too. Each run is written `{256}`
 * then `*`: V8 keeps a backtracking frame per character of a `{256,}`, and a run of ten million
 * overflowed the stack, refusing a request the body bound admits.
 */
const LONG_RUN =
  /(?<![\p{L}\p{M}])[\p{L}\p{M}]{256}[\p{L}\p{M}]*|(?<![^\s\p{L}\p{N}])[^\s\p{L}\p{N}]{256}[^\s\p{L}\p{N}]*|(?<!\s)\s{256}\s*/gu;
const RUN_SLICE = 256;

/**
 * The text's token count, each long run encoded a slice at a time: linear in the text's length.
 * A run's first slice is encoded with the text before it and its last with the text after it, so
 * the pieces at its edges are the pre-tokenizer's own; only a slice boundary inside the run may
 * differ from the piece's own, by a token at most.
 */
function encodedLength(enc: Tiktoken, text: string): number {
  if (text.length < RUN_SLICE) return enc.encode_ordinary(text).length;
  LONG_RUN.lastIndex = 0;
  let run = LONG_RUN.exec(text);
  if (run === null) return enc.encode_ordinary(text).length;
  let total = 0;
  let from = 0;
  while (run !== null) {
    const end = run.index + run[0].length;
    let at = run.index + RUN_SLICE;
    total += enc.encode_ordinary(text.slice(from, at)).length;
    for (; at + RUN_SLICE < end; at += RUN_SLICE) total += enc.encode_ordinary(text.slice(at, at + RUN_SLICE)).length;
    from = at;
    run = LONG_RUN.exec(text);
  }
  return total + enc.encode_ordinary(text.slice(from)).length;
}

const requireModule = createRequire(import.meta.url);
let tiktoken: typeof TiktokenModule | undefined;

/**
 * tiktoken is loaded on the first exact count, not at start: loading it instantiates its
 * WebAssembly (about 16 MB resident), and a proxy whose providers report usage rarely counts.
 */
function getEncoding(name: EncodingName): Tiktoken {
  tiktoken ??= requireModule('tiktoken') as typeof TiktokenModule;
  return tiktoken.get_encoding(name);
}
const O200K_FAMILIES = /^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o\d)/;

/**
 * o200k_base for the GPT-4o, GPT-4.1, GPT-5 and o-series families; cl100k_base for GPT-4,
 * GPT-3.5 and the embedding models. Anthropic, Gemini and open models publish no tokenizer
 * usable here, so cl100k_base stands in as an approximation for them: it is only used for
 * estimates before a call and when a provider reports no usage, never over reported usage.
 */
export function encodingForModel(model: string): EncodingName {
  return O200K_FAMILIES.test(normalizeModelId(model)) ? 'o200k_base' : 'cl100k_base';
}

export function createTokenCounter(options: TokenCounterOptions = {}): TokenCounter {
  const memoMinChars = options.memoMinChars ?? 4096;
  const memoEntries = options.memoEntries ?? 64;
  // Building an encoder parses its whole vocabulary, so each is made once, on first use.
  const encoders = new Map<EncodingName, Tiktoken>();
  const memoOf = (name: EncodingName) =>
    new BoundedMemo(memoEntries, (text: string) => encodedLength(encoder(name), text));
  const memos: Record<EncodingName, BoundedMemo<string, number>> = {
    o200k_base: memoOf('o200k_base'),
    cl100k_base: memoOf('cl100k_base'),
  };
  // Stream deltas are counted one by one, so the model's encoding is resolved once per model id.
  const encodingByModel = new BoundedMemo(ENCODING_MEMO_LIMIT, encodingForModel);
  const encodingOf = (model: string): EncodingName => encodingByModel.get(model);

  function encoder(name: EncodingName): Tiktoken {
    let enc = encoders.get(name);
    if (!enc) {
      enc = getEncoding(name);
      encoders.set(name, enc);
    }
    return enc;
  }

  let bounding = false;
  /** While `texts` runs: each text asked for. */
  let collecting: string[] | null = null;
  /** While `exactly` learns its texts: each text asked for, answered with its bound. */
  let learning: TextToCount[] | null = null;
  /** While `exactly` runs again: the counts of the texts it learnt, in the order asked. */
  let replaying: { texts: readonly TextToCount[]; counts: readonly number[]; next: number } | null = null;
  const offThreadMinChars = options.offThreadMinChars ?? 2048;
  const onThreadOnly = options.tokenizeOn === 'thread';
  /** While `exactly` counts here because the thread failed. */
  let failedOver = false;
  let thread: TokenThread | null = null;

  function count(name: EncodingName, text: string, framing = false): number {
    if (text.length === 0) return 0;
    if (collecting !== null) {
      if (!framing) collecting.push(text);
      return Buffer.byteLength(text);
    }
    if (bounding) return Buffer.byteLength(text);
    if (learning !== null) {
      learning.push({ encoding: name, text });
      return Buffer.byteLength(text);
    }
    if (replaying !== null) {
      const i = replaying.next++;
      const learnt = replaying.texts[i];
      // The same function asks for the same texts in the same order; anything else is counted here.
      if (learnt !== undefined && learnt.encoding === name && learnt.text === text)
        return replaying.counts[i] as number;
    }
    return inPlace(name, text);
  }

  /**
   * A count that cannot wait for the thread: exact, or, in a counter that tokenizes on the thread
   * only, the bound, which is never below the exact count. In the proxy only a ruleset swapped in
   * between a call's count and its evaluation asks for one (docs/performance.md).
   */
  function inPlace(name: EncodingName, text: string): number {
    if (onThreadOnly && !failedOver) return Buffer.byteLength(text);
    return text.length < memoMinChars ? encodedLength(encoder(name), text) : memos[name].get(text);
  }

  return {
    encodingFor: encodingOf,
    countText(model, text) {
      return count(encodingOf(model), text);
    },
    countChatMessages(model, messages) {
      const name = encodingOf(model);
      let total = REPLY_PRIMER;
      for (const m of messages) {
        total += TOKENS_PER_MESSAGE + count(name, m.role, true) + count(name, m.content);
        if (m.name) total += TOKENS_PER_NAME + count(name, m.name);
      }
      return total;
    },
    bounded(fn) {
      const outer = bounding;
      bounding = true;
      try {
        return fn();
      } finally {
        bounding = outer;
      }
    },
    texts(fn) {
      const outer = collecting;
      const texts: string[] = [];
      collecting = texts;
      try {
        fn();
      } finally {
        collecting = outer;
      }
      return texts;
    },
    async exactly(fn) {
      const texts: TextToCount[] = [];
      learning = texts;
      let first: ReturnType<typeof fn>;
      try {
        first = fn();
      } finally {
        learning = null;
      }
      // Nothing was counted, so nothing in it is an estimate.
      if (texts.length === 0) return first;
      let chars = 0;
      for (const t of texts) chars += t.text.length;
      if (!onThreadOnly && chars < offThreadMinChars) return fn();
      thread ??= options.createThread?.() ?? createTokenThread({ logger: options.logger });
      const counts = await thread.count(texts).catch(() => null);
      // Exact all the same: the one case a counter that tokenizes on the thread only loads
      // tiktoken here, stalling the loop once, rather than charge or decide on a bound.
      if (counts === null) {
        failedOver = true;
        try {
          return fn();
        } finally {
          failedOver = false;
        }
      }
      replaying = { texts, counts, next: 0 };
      try {
        return fn();
      } finally {
        replaying = null;
      }
    },
    countIn(encoding, text) {
      return inPlace(encoding, text);
    },
    free() {
      void thread?.close();
      thread = null;
      for (const enc of encoders.values()) enc.free();
      encoders.clear();
      memos.o200k_base.clear();
      memos.cl100k_base.clear();
    },
  };
}
