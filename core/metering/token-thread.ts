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

/**
 * How long after the thread failed counts are refused at once rather than start it again: a start
 * that fails (its entry file missing from a build) costs the event loop a `new Worker` each time,
 * 20–50 ms on a loaded machine, and would be paid by every count.
 */
const RETRY_MS = 60_000;

// Beside this file, with its extension: `.ts` run from source, `.js` once built.
const ENTRY = new URL(`./token-thread-worker${extname(new URL(import.meta.url).pathname)}`, import.meta.url);

export interface TokenThreadLogger {
  error(fields: Record<string, unknown>, message: string): void;
}

export interface TokenThreadOptions {
  /** The thread's body (the worker file beside this one). */
  entry?: URL;
  /** How long after a failure the thread is not started again (`RETRY_MS`). */
  retryMs?: number;
  /** Told of the thread's failure, once until it counts again. */
  logger?: TokenThreadLogger;
  now?: () => number;
}

/**
 * A worker thread that tokenizes, started on first use and stopped when idle. It never keeps the
 * process alive. A failure (the thread died, could not start) rejects every count in flight, and
 * every count for `retryMs` after it, at once; the next count after that starts a new thread.
 * The failure is logged once, and again only after the thread has counted since.
 */
export function createTokenThread(options: TokenThreadOptions = {}): TokenThread {
  const { entry = ENTRY, retryMs = RETRY_MS, logger, now = Date.now } = options;
  let worker: Worker | null = null;
  let nextId = 1;
  const pending = new Map<number, PromiseWithResolvers<number[]>>();
  let idle: NodeJS.Timeout | null = null;
  /** The last failure, and until when counts are refused because of it. */
  let failed: { error: Error; until: number } | null = null;
  let logged = false;

  const failAll = (error: Error) => {
    for (const waiting of pending.values()) waiting.reject(error);
    pending.clear();
  };

  const fail = (error: Error) => {
    failed = { error, until: now() + retryMs };
    failAll(error);
    if (logged) return;
    logged = true;
    logger?.error(
      { err: error.message, retry_ms: retryMs },
      'token thread failed; exact counts are made on the event loop until it starts again',
    );
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
      logged = false;
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
      fail(error);
    };
    started.on('error', lost);
    started.on('exit', (code) => lost(new Error(`token thread exited with code ${code}`)));
    return started;
  }

  return {
    count(texts) {
      if (failed !== null && now() < failed.until)
        return Promise.reject(new Error(`token thread not started again yet: ${failed.error.message}`));
      if (idle !== null) clearTimeout(idle);
      idle = null;
      try {
        worker ??= start();
      } catch (error) {
        // A thread refused at once (an entry Node cannot run) fails its count as one that dies does.
        const refused = error instanceof Error ? error : new Error(String(error));
        fail(refused);
        return Promise.reject(refused);
      }
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
