/**
 * The decoded size of every request held at once, approval holds and pause holds together,
 * against one bound (`proxy_held_max_bytes`): a count of holds alone lets a few large requests
 * keep hundreds of MB for as long as their holds last.
 */
export class HeldBytes {
  readonly #limit: number;
  #used = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get limit(): number {
    return this.#limit;
  }

  get used(): number {
    return this.#used;
  }

  /** Whether a request of `bytes` more can be held now. */
  fits(bytes: number): boolean {
    return this.#used + bytes <= this.#limit;
  }

  take(bytes: number): void {
    this.#used += bytes;
  }

  give(bytes: number): void {
    this.#used -= bytes;
  }
}

/** Why a request of `bytes` cannot be held: the words both kinds of hold refuse it with. */
export function overHeldBytes(held: HeldBytes, bytes: number): string {
  return `the requests held at this proxy already take ${held.used} of ${held.limit} bytes (proxy_held_max_bytes), and this one takes ${bytes}`;
}
