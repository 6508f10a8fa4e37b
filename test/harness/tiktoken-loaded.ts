import { createRequire } from 'node:module';

const requireHere = createRequire(import.meta.url);

/**
 * Whether tiktoken (its WebAssembly included) is loaded on the calling thread: modules `require`d
 * on a thread are in that thread's cache, a worker thread's are not.
 */
export function tiktokenLoaded(): boolean {
  return Object.keys(requireHere.cache).some((path) => path.includes('/node_modules/tiktoken/'));
}
