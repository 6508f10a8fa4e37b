import type { IncomingHttpHeaders } from 'node:http';
import { pipeline, type Readable, type Transform } from 'node:stream';
import { promisify } from 'node:util';
import {
  brotliDecompress,
  createBrotliDecompress,
  createGunzip,
  createInflate,
  gunzip,
  inflate,
  type ZlibOptions,
} from 'node:zlib';
import { SvcError } from '../../core/errors/index.ts';

type Decompress = (bytes: Buffer, options: ZlibOptions) => Promise<Buffer>;

/**
 * The content codings the proxy undoes (RFC 9110 §8.4.1). `deflate` is the zlib format the
 * RFC names; a raw deflate stream is not guessed at. Anything else is refused.
 */
const DECOMPRESS: Record<string, Decompress> = {
  gzip: promisify(gunzip),
  'x-gzip': promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
};

const DECOMPRESS_STREAM: Record<string, () => Transform> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** More layers than this is no client's doing; each layer costs a pass over up to the limit. */
const MAX_CODINGS = 3;

/** UTF-8, UTF-16LE and UTF-16BE byte order marks, longest first. */
const BOMS: readonly { bytes: readonly number[]; encoding: string }[] = [
  { bytes: [0xef, 0xbb, 0xbf], encoding: 'utf-8' },
  { bytes: [0xff, 0xfe], encoding: 'utf-16le' },
  { bytes: [0xfe, 0xff], encoding: 'utf-16be' },
];

export interface DecodedBody {
  /** The body as text, byte order mark removed. */
  text: string;
  /** The text as UTF-8: what goes upstream in place of the body received. */
  utf8: Buffer;
  /** Whether the received bytes differ from `utf8` (a coding, a charset, a BOM undone). */
  changed: boolean;
}

function unreadable(description: string, what = 'request body'): SvcError {
  return new SvcError('SVC-SYS-9002', `${what} cannot be decoded: ${description}`, { fields: 'body' }, [
    { field: 'body', description },
  ]);
}

function headerText(value: string | string[] | undefined): string {
  return Array.isArray(value) ? value.join(',') : (value ?? '');
}

/** The codings in the order they were applied (the header lists them so). */
export function contentCodings(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): string[] {
  return headerText(headers['content-encoding'])
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
}

/** The `charset` parameter of a Content-Type, lower case, or undefined. */
export function charsetOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
  }
  return undefined;
}

/**
 * Undoes the body's content codings, last applied first, each bounded: a layer that would
 * inflate past `limit` bytes ends the request with SVC-SYS-9009, so a small compressed bomb
 * costs at most `limit` bytes of memory, never the process.
 */
export async function decompress(
  bytes: Buffer,
  codings: readonly string[],
  limit: number,
  what = 'request body',
): Promise<Buffer> {
  if (codings.length > MAX_CODINGS) {
    throw unreadable(`content-encoding stacks ${codings.length} codings, more than ${MAX_CODINGS}`, what);
  }
  let out = bytes;
  for (const coding of [...codings].reverse()) {
    const undo = DECOMPRESS[coding];
    if (undo === undefined) throw unreadable(`unsupported content-encoding "${coding}"`, what);
    try {
      out = await undo(out, { maxOutputLength: limit });
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new SvcError('SVC-SYS-9009', `${what} larger than ${limit} bytes once decoded (${coding})`, {
          limit,
        });
      }
      throw unreadable(`not valid ${coding} data`, what);
    }
  }
  return out;
}

/**
 * A streamed body with its content codings undone as it flows (an event stream): memory stays
 * bounded by what the consumer holds. Throws SVC-SYS-9002 at once for a coding it cannot undo;
 * corrupt data errors the returned stream.
 */
export function decompressing(body: Readable, codings: readonly string[]): Readable {
  if (codings.length === 0) return body;
  if (codings.length > MAX_CODINGS) {
    throw unreadable(`content-encoding stacks ${codings.length} codings, more than ${MAX_CODINGS}`);
  }
  const stages = [...codings].reverse().map((coding) => {
    const create = DECOMPRESS_STREAM[coding];
    if (create === undefined) throw unreadable(`unsupported content-encoding "${coding}"`);
    return create();
  });
  // The last stage carries any failure to its reader; the callback only keeps it from being thrown.
  return pipeline([body, ...stages], () => undefined) as unknown as Readable;
}

/**
 * The encoding a body's text is read in: a byte order mark names it, else the Content-Type
 * charset, else UTF-8. An encoding the platform does not know, or a BOM that contradicts the
 * charset, is refused.
 */
function textEncoding(
  bytes: Buffer,
  contentType: string | undefined,
  what: string,
): { encoding: string; bom: boolean } {
  const bom = BOMS.find((b) => b.bytes.every((byte, i) => bytes[i] === byte));
  const charset = charsetOf(contentType);
  let declared: string | undefined;
  if (charset !== undefined) {
    try {
      declared = new TextDecoder(charset).encoding;
    } catch {
      throw unreadable(`unsupported charset "${charset}"`, what);
    }
  }
  if (bom !== undefined && declared !== undefined && bom.encoding !== declared) {
    throw unreadable(`byte order mark says ${bom.encoding} but content-type says charset=${charset}`, what);
  }
  return { encoding: bom?.encoding ?? declared ?? 'utf-8', bom: bom !== undefined };
}

function decodeIn(bytes: Buffer, encoding: string, what: string): string {
  try {
    return new TextDecoder(encoding, { fatal: true }).decode(bytes);
  } catch {
    throw unreadable(`bytes are not valid ${encoding}`, what);
  }
}

/**
 * The text of a body: a byte order mark names the encoding, else the Content-Type charset, else
 * UTF-8. Bytes invalid in that encoding, an encoding the platform does not know, or a BOM that
 * contradicts the charset are refused: a server reading them another way would see another body.
 */
export function decodeText(bytes: Buffer, contentType: string | undefined, what = 'request body'): string {
  return decodeIn(bytes, textEncoding(bytes, contentType, what).encoding, what);
}

/**
 * Decodes a body the way its reader would (content codings, BOM, charset): a request as the
 * server reads it, an answer as the agent's client does. So what the proxy governs is what is
 * acted on: the caller passes on `utf8`, with the content-encoding dropped and the charset set
 * to UTF-8 (see `decodedHeaders`). `what` names the body in errors.
 */
export async function decodeBody(
  bytes: Buffer,
  headers: IncomingHttpHeaders,
  limit: number,
  what = 'request body',
): Promise<DecodedBody> {
  const codings = contentCodings(headers);
  const plain = codings.length === 0 ? bytes : await decompress(bytes, codings, limit, what);
  const { encoding, bom } = textEncoding(plain, headers['content-type'], what);
  const text = decodeIn(plain, encoding, what);
  // Valid UTF-8 without a byte order mark decodes to a text whose UTF-8 is those very bytes (the
  // strict decoder refused anything else): they go on as received, not encoded again.
  if (plain === bytes && encoding === 'utf-8' && !bom) return { text, utf8: bytes, changed: false };
  const utf8 = Buffer.from(text, 'utf8');
  return { text, utf8, changed: !utf8.equals(bytes) };
}

/**
 * A copy of `headers` without the fields `names` (lower case, as node and undici name them). The
 * fields are left out of the copy rather than deleted from it: a deletion turns the copy into a
 * dictionary, slower to build and to write, and on the path of every call.
 */
export function headersWithout<T extends object>(headers: T, names: readonly string[]): T {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(headers)) if (!names.includes(name)) out[name] = headers[name as keyof T];
  return out as T;
}

/** What a body decoded as it flows no longer has: a known length, a coding. */
const STREAMED_DROPS = ['content-length', 'content-encoding'];

/** The headers that describe a stream passed on decoded as it arrives. */
export function streamedHeaders<T extends object>(headers: T): T {
  return headersWithout(headers, STREAMED_DROPS);
}

/** What a body passed on decoded no longer has: its coding. */
export const DECODED_DROPS = ['content-encoding'];

/** The headers that describe the decoded body passed on in place of the one received. */
export function decodedHeaders(headers: IncomingHttpHeaders, body: DecodedBody): IncomingHttpHeaders {
  const out = headersWithout(headers, DECODED_DROPS);
  out['content-length'] = String(body.utf8.length);
  const type = headers['content-type'];
  if (type !== undefined && charsetOf(type) !== undefined) {
    out['content-type'] = type.replace(/;\s*charset\s*=\s*("[^"]*"|[^;]*)/i, '; charset=utf-8');
  }
  return out;
}
