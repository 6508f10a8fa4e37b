/** A first-come, first-served lock across awaits: `acquire` resolves with the release function. */
export class AsyncLock {
  #tail: Promise<void> = Promise.resolve();

  acquire(): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const granted = this.#tail.then(() => release);
    this.#tail = this.#tail.then(() => held);
    return granted;
  }
}
