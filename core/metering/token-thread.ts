import { extname } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { EncodingName } from './tokens.ts';

/** A text to tokenize, with the encoding it is counted in. */
export interface TextToCount {
  encoding: EncodingName;
  text: string;
}

export interface CountRequest {
  id: number;
  texts: readonly TextToCount[];
}

export type CountReply = { id: number; counts: number[] } | { id: number; error: string };

export interface TokenThread {
  /** The exact count of each text, in order. Rejects when the thread fails or is closed. */
  count(texts: readonly TextToCount[]): Promise<number[]>;
  close(): Promise<void>;
}

/**
 * A thread with nothing to count this long is stopped: it holds 30–40 MB. Every exact count of the
 * proxy and the control plane goes to it, and a new thread's first count waits for its encoder
 * (0.5–4 s), so it is kept through the pauses of an agent that calls a few times a minute.
 */
const IDLE_MS = 600_000;

// Beside this file, with its extension: `.ts` run from source, `.js` once built.
const ENTRY = new URL(`./token-thread-worker${extname(new URL(import.meta.url).pathname)}`, import.meta.url);

/**
 * A worker thread that tokenizes, started on first use and stopped when idle. It never keeps the
 * process alive. A failure (the thread died, could not start) rejects every count in flight and
 * the next count starts a new thread.
 */
export function createTokenThread(entry: URL = ENTRY): TokenThread {
  let worker: Worker | null = null;
  let nextId = 1;
  const pending = new Map<number, PromiseWithResolvers<number[]>>();
  let idle: NodeJS.Timeout | null = null;

  const failAll = (error: Error) => {
    for (const waiting of pending.values()) waiting.reject(error);
    pending.clear();
  };

  function stop(): Promise<void> {
    if (idle !== null) clearTimeout(idle);
    idle = null;
    const current = worker;
    worker = null;
    failAll(new Error('token thread stopped'));
    return current === null ? Promise.resolve() : current.terminate().then(() => undefined);
  }

  function settleIdle(): void {
    if (pending.size > 0 || worker === null) return;
    worker.unref();
    idle = setTimeout(() => void stop(), IDLE_MS).unref();
  }

  function start(): Worker {
    // The process's own flags are not the thread's (`--inspect` would claim the same port).
    const started = new Worker(entry, { execArgv: [] });
    started.on('message', (reply: CountReply) => {
      const waiting = pending.get(reply.id);
      if (waiting === undefined) return;
      pending.delete(reply.id);
      if ('error' in reply) waiting.reject(new Error(reply.error));
      else waiting.resolve(reply.counts);
      settleIdle();
    });
    const lost = (error: Error) => {
      if (worker !== started) return;
      worker = null;
      failAll(error);
    };
    started.on('error', lost);
    started.on('exit', (code) => lost(new Error(`token thread exited with code ${code}`)));
    return started;
  }

  return {
    count(texts) {
      if (idle !== null) clearTimeout(idle);
      idle = null;
      worker ??= start();
      worker.ref();
      const id = nextId++;
      const waiting = Promise.withResolvers<number[]>();
      pending.set(id, waiting);
      worker.postMessage({ id, texts } satisfies CountRequest);
      return waiting.promise;
    },
    close: stop,
  };
}
