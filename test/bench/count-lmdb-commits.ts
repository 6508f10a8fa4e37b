/**
 * A preload that counts the LMDB write transactions of a process and prints them when it exits:
 * the transactions asked for (`childTransaction`, `transactionSync`) and the asynchronous commits
 * LMDB's writer made of them (lmdb-js merges the child transactions queued while a commit is
 * waiting into that commit). For a bench's server process:
 *
 *   BENCH_SERVER_FLAGS="--import ./test/bench/count-lmdb-commits.ts" node test/bench/envelope-create-http.ts 20000 16
 *
 * Prints figures; not a test.
 */
import { EventEmitter } from 'node:events';

interface Store {
  childTransaction?: (...args: unknown[]) => unknown;
  transactionSync?: (...args: unknown[]) => unknown;
  on(event: string, listener: () => void): unknown;
}

const counts = { childTransaction: 0, transactionSync: 0, commits: 0 };
let listening = false;
// lmdb-js makes a class per environment, so its stores are caught as they are made, not by class.
const emitterInit = (EventEmitter as unknown as { init: (...args: unknown[]) => void }).init;
(EventEmitter as unknown as { init: (...args: unknown[]) => void }).init = function (this: Store, ...args) {
  emitterInit.apply(this, args);
  if (typeof this.childTransaction !== 'function' || typeof this.transactionSync !== 'function') return;
  for (const name of ['childTransaction', 'transactionSync'] as const) {
    const original = this[name]!;
    this[name] = function (this: Store, ...callArgs: unknown[]) {
      counts[name]++;
      // The first store that writes asynchronously is the environment whose commits are counted.
      if (name === 'childTransaction' && !listening) {
        listening = true;
        this.on('aftercommit', () => counts.commits++);
      }
      return original.apply(this, callArgs);
    };
  }
};

process.on('exit', () => {
  console.error(
    `LMDB: ${counts.childTransaction} child transactions and ${counts.transactionSync} synchronous ones asked for, ` +
      `${counts.commits} asynchronous commits`,
  );
});
