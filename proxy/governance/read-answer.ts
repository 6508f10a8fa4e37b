import { isSvcError } from '../../core/errors/index.ts';
import type { UpstreamResponse } from '../upstream/index.ts';
import { decodeBody, type DecodedBody } from './decode-body.ts';
import { MAX_BODY_DEPTH, readBody } from './read-body.ts';
import { parseStrictJson } from './strict-json.ts';

/**
 * An upstream answer read whole, as the agent's client will read it, or why it could not be:
 * at the `read` (over the bound, cut) or at the `decode` (a coding that does not undo, text that
 * is not JSON with each key once). Each caller names its own refusal and charge from this.
 */
export type AnswerReading =
  | { ok: true; answer: unknown; decoded: DecodedBody }
  | { ok: false; stage: 'read' | 'decode'; tooLarge: boolean; message: string };

/**
 * Reads `response` within `limit` bytes (raw and decoded), undoes its coding and parses it
 * strictly: one JSON document, or with `jsonLines` one per line. `what` names it in the message.
 */
export async function readAnswer(
  response: UpstreamResponse,
  limit: number,
  what: string,
  jsonLines = false,
): Promise<AnswerReading> {
  let bytes: Buffer;
  try {
    bytes = await readBody(response.body, limit, { what, rest: 'destroy' });
  } catch (error) {
    const tooLarge = isSvcError(error) && error.code === 'SVC-SYS-9009';
    return {
      ok: false,
      stage: 'read',
      tooLarge,
      message: tooLarge
        ? `${what} is larger than ${limit} bytes (proxy_response_limit_bytes)`
        : `${what} failed mid-way: ${(error as Error).message}`,
    };
  }
  try {
    const decoded = await decodeBody(bytes, response.headers, limit, what);
    const texts = jsonLines ? decoded.text.split('\n').filter((line) => line.trim() !== '') : [decoded.text];
    const documents: unknown[] = [];
    for (const text of texts) {
      const parsed = parseStrictJson(text, { maxDepth: MAX_BODY_DEPTH });
      if (!parsed.ok)
        return { ok: false, stage: 'decode', tooLarge: false, message: `${what} cannot be read: ${parsed.reason}` };
      documents.push(parsed.value);
    }
    return { ok: true, answer: jsonLines ? documents : documents[0], decoded };
  } catch (error) {
    if (!isSvcError(error)) throw error;
    return { ok: false, stage: 'decode', tooLarge: error.code === 'SVC-SYS-9009', message: error.message };
  }
}
