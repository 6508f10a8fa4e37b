/** The token thread's body (token-thread.ts): counts each request's texts and answers. */
import { parentPort } from 'node:worker_threads';
import type { CountReply, CountRequest } from './token-thread.ts';
import { createTokenCounter } from './tokens.ts';

const counter = createTokenCounter({ offThreadMinChars: Number.POSITIVE_INFINITY });

parentPort?.on('message', ({ id, texts }: CountRequest) => {
  let reply: CountReply;
  try {
    reply = { id, counts: texts.map((t) => counter.countIn(t.encoding, t.text)) };
  } catch (error) {
    reply = { id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(reply);
});
