import type { IncomingMessage } from 'node:http';

/** A body declared over the limit is read and thrown away up to this many times the limit. */
const DRAINED_LIMITS = 4;
/** Nor longer than this: a client that trickles its body is cut off after it. */
const DRAIN_TIMEOUT_MS = 5000;

/**
 * Whether the request declares a body over the limit; one without a declared length meets the
 * body parser's own bound.
 */
export function declaredOverLimit(raw: IncomingMessage, limitBytes: number): boolean {
  return Number(raw.headers['content-length']) > limitBytes;
}

/**
 * Whether a request whose declared body is over `limitBytes` may keep its connection once refused.
 * The body is read to its end first (within a bound), so the 413 reaches a client that is still
 * sending it: closing at once, as the body parser does, cuts such a client off mid-write (it sees
 * a broken pipe, not the answer). A body declared far over the limit is not read, and one that
 * trickles is not waited for: false, and the connection closes after the answer. Node's parser
 * holds a body to its declared length, so the declared length bounds what is read.
 */
export function drainOversizedBody(raw: IncomingMessage, limitBytes: number): Promise<boolean> {
  if (Number(raw.headers['content-length']) > limitBytes * DRAINED_LIMITS) return Promise.resolve(false);
  return new Promise((resolve) => {
    const finish = (drained: boolean) => {
      clearTimeout(timer);
      raw.off('end', onEnd).off('error', onFail).off('close', onClose);
      if (!drained) raw.pause();
      resolve(drained);
    };
    const onEnd = () => finish(true);
    const onFail = () => finish(false);
    const onClose = () => finish(raw.complete);
    const timer = setTimeout(() => finish(false), DRAIN_TIMEOUT_MS);
    raw.on('end', onEnd).on('error', onFail).on('close', onClose);
    raw.resume();
  });
}
