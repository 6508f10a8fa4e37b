import type { TokenCounter } from '../../core/metering/tokens.ts';

const SAMPLE_BYTES = 64 * 1024;

/**
 * The token estimate of a body of any size at a bounded cost: the first 64 KiB are kept and
 * counted with the tokenizer, and a larger body is scaled from them by its byte count. Only
 * the sample is held, never the body.
 */
export class TextSample {
  readonly #chunks: Buffer[] = [];
  #held = 0;
  #total = 0;

  get totalBytes(): number {
    return this.#total;
  }

  push(chunk: Uint8Array): void {
    this.#total += chunk.length;
    if (this.#held >= SAMPLE_BYTES) return;
    const part = Buffer.from(chunk.buffer, chunk.byteOffset, Math.min(chunk.length, SAMPLE_BYTES - this.#held));
    this.#chunks.push(Buffer.from(part));
    this.#held += part.length;
  }

  async tokens(counter: TokenCounter, model: string): Promise<number> {
    if (this.#total === 0) return 0;
    const text = Buffer.concat(this.#chunks).toString('utf8');
    const counted = await counter.exactly(() => counter.countText(model, text));
    return this.#held >= this.#total ? counted : Math.ceil((counted * this.#total) / this.#held);
  }
}
