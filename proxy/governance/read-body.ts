import type { Readable } from 'node:stream';
import { SvcError } from '../../core/errors/index.ts';

/** Reads a body whole (governance needs the JSON), refusing one larger than `limit`. */
export async function readBody(body: Readable, limit: number, what = 'request body'): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > limit) {
      body.destroy();
      throw new SvcError('SVC-SYS-9009', `${what} larger than ${limit} bytes`, { limit });
    }
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

export function parseJsonBody(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new SvcError('SVC-SYS-9002', `request body is not JSON: ${(error as Error).message}`, { fields: 'body' }, [
      { field: 'body', description: 'must be JSON' },
    ]);
  }
}
