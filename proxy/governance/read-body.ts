import type { Readable, Writable } from 'node:stream';
import { SvcError } from '../../core/errors/index.ts';
import { drainOversizedBody } from '../../core/http/oversized-body.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import { parseStrictJson } from './strict-json.ts';

export interface ReadBodyOptions {
  /** Names the body in the error. */
  what?: string;
  /** Its Content-Length, when declared: a body declared too large is refused before any read. */
  declaredLength?: string | string[] | undefined;
  /**
   * What becomes of the unread rest of a body refused as too large. An upstream answer's is
   * closed at once (`destroy`). A client's request names the response its refusal goes out on:
   * the rest is read and dropped within the bounds of `drainOversizedBody`, so the refusal still
   * reaches the client on its connection; a body beyond them (endless, or trickling) has its
   * connection closed once the refusal is sent.
   */
  rest: 'destroy' | { answer: Writable };
}

/**
 * Reads a body whole (governance needs the JSON), refusing one larger than `limit` with
 * SVC-SYS-9009 as soon as it is known to be; never more than `limit` bytes are held.
 */
export function readBody(body: Readable, limit: number, options: ReadBodyOptions): Promise<Buffer> {
  const tooLarge = () =>
    new SvcError('SVC-SYS-9009', `${options.what ?? 'request body'} larger than ${limit} bytes`, { limit });
  const drop = () => {
    // Nothing reads the stream any more: a failure it reports on its way out has no one to tell.
    body.on('error', () => undefined);
    const { rest } = options;
    if (rest === 'destroy') return void body.destroy();
    void drainOversizedBody(body, limit, options.declaredLength).then((drained) => {
      if (!drained) afterAnswer(rest.answer, () => body.destroy());
    });
  };
  const declared = options.declaredLength;
  if (typeof declared === 'string' && Number(declared) > limit) {
    drop();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      chunks.length = 0;
      settle();
      drop();
      reject(tooLarge());
    };
    const onEnd = () => {
      settle();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      settle();
      reject(error);
    };
    const onClose = () => {
      settle();
      reject(new Error('body closed before its end'));
    };
    const settle = () => {
      body.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    };
    body.on('data', onData).once('end', onEnd).once('error', onError).once('close', onClose);
  });
}

/** A client's request body, by `readBody`: refused as too large on its declared length already. */
export function readRequestBody(req: ProxiedRequest, limit: number): Promise<Buffer> {
  return readBody(req.body, limit, { declaredLength: req.headers['content-length'], rest: { answer: req.clientRes } });
}

/** Runs `then` once the answer is sent, or could not be. */
function afterAnswer(answer: Writable, then: () => void): void {
  if (answer.writableFinished || answer.destroyed) then();
  else answer.once('finish', then).once('close', then);
}

/**
 * How deep an LLM request body may nest. Far beyond any real request (a tool's JSON schema
 * included), and far below what the readers of message contents, which walk them recursively,
 * can follow before their stack runs out.
 */
export const MAX_BODY_DEPTH = 128;

/**
 * The JSON of a decoded request body. A key given twice in one object is refused like text that
 * is not JSON: which of the two a provider reads is its own choice, so the proxy cannot know what
 * it would govern. So is nesting deeper than `MAX_BODY_DEPTH`.
 */
export function parseJsonBody(text: string): unknown {
  const parsed = parseStrictJson(text, { maxDepth: MAX_BODY_DEPTH });
  if (parsed.ok) return parsed.value;
  throw bodyRefused(parsed.reason);
}

/** A request body refused for why `parseStrictJson` gives: SVC-SYS-9002 naming `body`. */
export function bodyRefused(reason: string): SvcError {
  return new SvcError('SVC-SYS-9002', `request body refused: ${reason}`, { fields: 'body' }, [
    {
      field: 'body',
      description: `must be JSON with each key once per object, nested at most ${MAX_BODY_DEPTH} levels`,
    },
  ]);
}
