import type { IncomingMessage } from 'node:http';

/** A body over the limit is read and thrown away up to this many times the limit, then cut off. */
const DRAINED_LIMITS = 4;
/** Nor longer than this: a client that trickles its body is cut off after it. */
const DRAIN_TIMEOUT_MS = 5000;

/** Reads the request body to its end and discards it; false when it ran past `maxBytes` or the time. */
function discard(raw: IncomingMessage, maxBytes: number): Promise<boolean> {
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (drained: boolean) => {
      clearTimeout(timer);
      raw.off('data', onData).off('end', onEnd).off('error', onFail).off('close', onClose);
      if (!drained) raw.pause();
      resolve(drained);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onFail = () => finish(false);
    const onClose = () => finish(raw.complete);
    const timer = setTimeout(() => finish(false), DRAIN_TIMEOUT_MS);
    raw.on('data', onData).on('end', onEnd).on('error', onFail).on('close', onClose);
    raw.resume();
  });
}

/**
 * Whether a request whose declared body is over `limitBytes` may keep its connection once refused.
 * The body is read to its end first (within a bound), so the 413 reaches a client that is still
 * sending it: closing at once, as the body parser does, cuts such a client off mid-write (it sees
 * a broken pipe, not the answer). A body far over the limit, or one that trickles, is not waited
 * for: false, and the connection closes after the answer.
 */
export function drainOversizedBody(raw: IncomingMessage, limitBytes: number): Promise<boolean> {
  return discard(raw, limitBytes * DRAINED_LIMITS);
}

/** Whether the request declares a body over the limit (one without a declared length meets the parser's bound). */
export function declaredOverLimit(raw: IncomingMessage, limitBytes: number): boolean {
  return Number(raw.headers['content-length']) > limitBytes;
}
