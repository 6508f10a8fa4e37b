import { once } from 'node:events';
import type { ServerResponse } from 'node:http';

/** Writes to the client with backpressure; false when the client went away. */
export async function writeToClient(res: ServerResponse, bytes: Uint8Array, signal: AbortSignal): Promise<boolean> {
  if (res.destroyed || signal.aborted) return false;
  if (bytes.length === 0 || res.write(bytes)) return true;
  try {
    await once(res, 'drain', { signal });
    return true;
  } catch {
    return false;
  }
}
