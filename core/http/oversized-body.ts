import type { Readable } from 'node:stream';

/** A body refused as too large is read and thrown away up to this many times the limit. */
const DRAINED_LIMITS = 4;
/** Nor longer than this: a client that trickles its body is cut off after it. */
const DRAIN_TIMEOUT_MS = 5000;

/**
 * Reads and drops a body refused as larger than `limitBytes`, so the refusal reaches a client
 * that is still sending it: closing the connection at once cuts such a client off mid-write (it
 * sees a broken pipe, not the answer). True once the body ended. False, with the stream paused,
 * for a body declared (`declaredLength`) or read beyond four times the limit, one still arriving
 * after 5 s (a client that trickles, or never stops) and one that fails: its connection is to
 * be closed after the answer.
 */
export function drainOversizedBody(
  body: Readable,
  limitBytes: number,
  declaredLength: string | string[] | undefined,
): Promise<boolean> {
  const maxBytes = limitBytes * DRAINED_LIMITS;
  if (typeof declaredLength === 'string' && Number(declaredLength) > maxBytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let read = 0;
    const finish = (drained: boolean) => {
      clearTimeout(timer);
      body.off('data', onData).off('end', onEnd).off('error', onFail).off('close', onFail);
      if (!drained) body.pause();
      resolve(drained);
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onFail = () => finish(false);
    const timer = setTimeout(onFail, DRAIN_TIMEOUT_MS);
    body.on('data', onData).on('end', onEnd).on('error', onFail).on('close', onFail);
    body.resume();
  });
}
