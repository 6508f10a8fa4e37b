/** Runs `fn` so that a synchronous throw (say, a validation error) arrives as a rejection. */
export function asPromise<T>(fn: () => T | Promise<T>): Promise<T> {
  return new Promise<T>((resolve) => resolve(fn()));
}
