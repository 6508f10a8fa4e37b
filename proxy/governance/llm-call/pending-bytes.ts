/**
 * The bytes of a stream cleared to go to the agent, in order, until they are written. Most events
 * pass on unchanged, each a view of the chunk it came in, one after the other: views that follow
 * on in the same buffer are held as one run. A chunk's events then leave one view behind, not one
 * per event (which lived until the answer ended and were promoted by the collector with it), and
 * the answer's last write joins a few runs instead of every event.
 */
export class PendingBytes {
  /** Runs closed by bytes from elsewhere. */
  #pieces: Uint8Array[] = [];
  /** The open run: `#end - #start` bytes of `#buffer`; none while `#buffer` is null. */
  #buffer: ArrayBufferLike | null = null;
  #start = 0;
  #end = 0;

  get empty(): boolean {
    return this.#buffer === null && this.#pieces.length === 0;
  }

  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    if (bytes.buffer === this.#buffer && bytes.byteOffset === this.#end) {
      this.#end += bytes.length;
      return;
    }
    this.#close();
    this.#buffer = bytes.buffer;
    this.#start = bytes.byteOffset;
    this.#end = bytes.byteOffset + bytes.length;
  }

  /** What is held, then `tail`, as one array (a view when it is one run); empties the hold. */
  take(tail?: Uint8Array): Uint8Array {
    if (tail !== undefined) this.push(tail);
    this.#close();
    const pieces = this.#pieces;
    this.#pieces = [];
    return pieces.length === 1 ? (pieces[0] as Uint8Array) : Buffer.concat(pieces);
  }

  #close(): void {
    if (this.#buffer === null) return;
    this.#pieces.push(new Uint8Array(this.#buffer, this.#start, this.#end - this.#start));
    this.#buffer = null;
  }
}
