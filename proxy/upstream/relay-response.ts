import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { UpstreamResponse } from './upstream-client.ts';

/**
 * Writes an upstream answer to the client unchanged, chunk by chunk, with backpressure.
 * An upstream failure mid-body destroys the client response, so the client sees a cut stream
 * rather than a silently truncated success.
 */
export async function relayResponse(res: ServerResponse, upstream: UpstreamResponse): Promise<void> {
  res.writeHead(upstream.statusCode, upstream.headers);
  // A stream may pause long before its first chunk, so its headers go out at once; a sized body
  // goes out with its headers in one write.
  if (upstream.headers['content-length'] === undefined) res.flushHeaders();
  await pipeline(upstream.body, res);
}
