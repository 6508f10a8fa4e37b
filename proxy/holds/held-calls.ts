import { randomUUID } from 'node:crypto';
import type { HeldBytes } from './held-bytes.ts';

/** How a hold ended without being released: its timeout, the proxy's shutdown, or its call's cancellation. */
export type HoldEnding<T> = { outcome: 'released'; value: T } | { outcome: 'timed_out' | 'shutdown' | 'cancelled' };

interface Held<T> {
  tag: string;
  finish(ending: HoldEnding<T>): void;
}

/**
 * Calls held before anything is sent upstream, each until it is released, under its tag (an
 * approval decided) or from within (a paused envelope resumed), its timeout passes, its call is cancelled (its
 * client left, its envelope ended), or the proxy shuts down. Bounded: at most `maxHeld` calls
 * wait at once, and their requests' decoded bytes count against `bytes`, shared with the other
 * holds; the caller refuses one more (`refusal`), fail closed. `close` ends every hold as
 * `shutdown` so each is answered, and refuses every hold from then on; nothing is dropped silently.
 */
export class HeldCalls<T> {
  readonly #maxHeld: number;
  readonly #bytes: HeldBytes;
  readonly #onSize: (size: number) => void;
  readonly #held = new Map<string, Held<T>>();
  #closed = false;

  constructor(maxHeld: number, bytes: HeldBytes, onSize: (size: number) => void) {
    this.#maxHeld = maxHeld;
    this.#bytes = bytes;
    this.#onSize = onSize;
  }

  get size(): number {
    return this.#held.size;
  }

  get maxHeld(): number {
    return this.#maxHeld;
  }

  get bytes(): HeldBytes {
    return this.#bytes;
  }

  /** Why one more call, its request `bytes` long, cannot be held now, or null when it can. */
  refusal(bytes: number): 'shutdown' | 'full' | 'bytes' | null {
    if (this.#closed) return 'shutdown';
    if (this.#held.size >= this.#maxHeld) return 'full';
    return this.#bytes.fits(bytes) ? null : 'bytes';
  }

  /**
   * Holds a call under `tag`, its request `bytes` long, until it ends. `start` runs once it is held, with `release` to end
   * it from within (an answer to a re-check); the cleanup it returns runs when the hold ends.
   */
  hold(
    tag: string,
    bytes: number,
    timeoutMs: number,
    signal: AbortSignal,
    start?: (release: (value: T) => void) => () => void,
  ): Promise<HoldEnding<T>> {
    const key = randomUUID();
    return new Promise<HoldEnding<T>>((resolve) => {
      let done = false;
      let cleanup: () => void = () => undefined;
      const finish = (ending: HoldEnding<T>): void => {
        if (done) return;
        done = true;
        clearTimeout(deadline);
        signal.removeEventListener('abort', gone);
        cleanup();
        this.#held.delete(key);
        this.#bytes.give(bytes);
        this.#onSize(this.#held.size);
        resolve(ending);
      };
      const gone = (): void => finish({ outcome: 'cancelled' });
      const deadline = setTimeout(() => finish({ outcome: 'timed_out' }), timeoutMs);
      this.#held.set(key, { tag, finish });
      this.#bytes.take(bytes);
      this.#onSize(this.#held.size);
      if (signal.aborted) return gone();
      signal.addEventListener('abort', gone, { once: true });
      if (start !== undefined) {
        const stop = start((value) => finish({ outcome: 'released', value }));
        if (done) stop();
        else cleanup = stop;
      }
    });
  }

  /** Releases every call held under `tag` with `value`; how many were. */
  release(tag: string, value: T): number {
    let released = 0;
    for (const held of [...this.#held.values()]) {
      if (held.tag !== tag) continue;
      held.finish({ outcome: 'released', value });
      released++;
    }
    return released;
  }

  /**
   * Ends every hold as `shutdown`, and refuses every hold from now on. Resolves once the held
   * calls' handlers have run on (their refusals written), so that the listener closing its
   * connections next does not cut them off unanswered.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const held = [...this.#held.values()];
    for (const call of held) call.finish({ outcome: 'shutdown' });
    if (held.length > 0) await new Promise((resolve) => setImmediate(resolve));
  }
}
