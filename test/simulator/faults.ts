import type { ServerResponse } from 'node:http';

/**
 * Makes the answer fail mid-body: its headers and first `bytes` bytes of body go out, then
 * the connection is destroyed, as a provider whose connection resets mid-answer.
 */
export function resetAfterBytes(res: ServerResponse, bytes: number): void {
  let left = bytes;
  const write = res.write.bind(res) as (chunk: string | Uint8Array) => boolean;
  const cut = (chunk: string | Uint8Array | undefined): boolean => {
    if (chunk === undefined || typeof chunk === 'function') return true;
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk);
    if (buf.length < left) {
      left -= buf.length;
      write(buf);
      return true;
    }
    if (left > 0) write(buf.subarray(0, left));
    left = 0;
    // Let the partial body leave before the reset.
    setImmediate(() => res.socket?.destroy());
    return false;
  };
  res.write = ((chunk: string | Uint8Array) => {
    if (left === 0) return false;
    if (!cut(chunk)) return false;
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: string | Uint8Array) => {
    if (left > 0 && chunk !== undefined && typeof chunk !== 'function') cut(chunk);
    if (left > 0) setImmediate(() => res.socket?.destroy());
    return res;
  }) as typeof res.end;
}
