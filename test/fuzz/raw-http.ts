import { connect, type Socket } from 'node:net';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

/**
 * A raw HTTP/1.1 client for the fuzz suites: it writes exactly the bytes it is given (lying
 * lengths, duplicated fields, broken framing), optionally inside a CONNECT tunnel first, and
 * reads the first answer back without trusting it to be well formed.
 */
export interface RawRequest {
  /** `POST`, `GET`, or anything else. */
  method: string;
  /** The request target as written on the request line: a path or an absolute URI. */
  target: string;
  /** Header fields in order; a name may repeat. */
  headers: readonly (readonly [string, string])[];
  body: Buffer;
  /**
   * How the body is framed: a correct `content-length`, a lying one (`delta` added), chunked
   * transfer coding, both (a smuggling shape servers must refuse), or none at all.
   */
  framing:
    | { kind: 'length' }
    | { kind: 'lying-length'; delta: number }
    | { kind: 'chunked' }
    | { kind: 'both' }
    | { kind: 'none' };
}

export interface RawAnswer {
  /** Null when no status line arrived (the connection closed or was abandoned first). */
  status: number | null;
  /** Field names in lower case; repeated fields keep every value. */
  headers: Record<string, string[]>;
  /** The body with its transfer coding undone (content coding left as it came). */
  body: Buffer;
  /** The client gave up on purpose (`abortAfterMs`). */
  aborted: boolean;
  /** The answer did not end within the time limit. */
  timedOut: boolean;
}

export interface ExchangeOptions {
  /** Host and port of the proxy. */
  port: number;
  /** Open a tunnel with `CONNECT <authority>` first and send the request inside it (as plain HTTP). */
  connect?: string;
  /** The client leaves (closes its socket) after this long, answered or not. */
  abortAfterMs?: number;
  /** The most an exchange may take before it counts as a hang. */
  timeoutMs: number;
}

const CRLF = '\r\n';

/** The bytes of a request as `request` describes them. */
export function requestBytes(request: RawRequest): Buffer {
  const lines = [`${request.method} ${request.target} HTTP/1.1`];
  for (const [name, value] of request.headers) lines.push(`${name}: ${value}`);
  const { body, framing } = request;
  let payload = body;
  if (framing.kind === 'length') lines.push(`content-length: ${body.length}`);
  if (framing.kind === 'lying-length') lines.push(`content-length: ${Math.max(0, body.length + framing.delta)}`);
  if (framing.kind === 'chunked' || framing.kind === 'both') {
    lines.push('transfer-encoding: chunked');
    if (framing.kind === 'both') lines.push(`content-length: ${body.length}`);
    payload = chunked(body);
  }
  return Buffer.concat([Buffer.from(lines.join(CRLF) + CRLF + CRLF, 'latin1'), payload]);
}

/** Chunked transfer coding in pieces of varying sizes. */
function chunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let size = 1;
  for (let at = 0; at < body.length; at += size, size = (size * 7 + 3) % 4099 || 1) {
    const piece = body.subarray(at, at + size);
    parts.push(Buffer.from(`${piece.length.toString(16)}${CRLF}`, 'latin1'), piece, Buffer.from(CRLF, 'latin1'));
  }
  parts.push(Buffer.from(`0${CRLF}${CRLF}`, 'latin1'));
  return Buffer.concat(parts);
}

/** Sends `bytes` and reads the first answer until the server closes, the answer is complete, or time is up. */
export function exchange(bytes: Buffer, options: ExchangeOptions): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket: Socket = connect(options.port, '127.0.0.1');
    let received = Buffer.alloc(0);
    let tunnelled = options.connect === undefined;
    let aborted = false;
    let timedOut = false;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(abortTimer);
      clearTimeout(hangTimer);
      socket.destroy();
      resolve({ ...parseAnswer(received), aborted, timedOut });
    };
    const abortTimer =
      options.abortAfterMs === undefined
        ? undefined
        : setTimeout(() => {
            aborted = true;
            finish();
          }, options.abortAfterMs);
    const hangTimer = setTimeout(() => {
      timedOut = true;
      finish();
    }, options.timeoutMs);
    socket.on('connect', () => {
      if (tunnelled) socket.write(bytes);
      else socket.write(`CONNECT ${options.connect} HTTP/1.1${CRLF}host: ${options.connect}${CRLF}${CRLF}`);
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (!tunnelled) {
        const end = received.indexOf(CRLF + CRLF);
        if (end < 0) return;
        if (!received.subarray(0, 12).toString('latin1').startsWith('HTTP/1.1 200')) return;
        tunnelled = true;
        received = received.subarray(end + 4);
        socket.write(bytes);
        return;
      }
      if (answerComplete(received)) finish();
    });
    socket.on('error', finish);
    socket.on('close', finish);
  });
}

interface Head {
  status: number;
  headers: Record<string, string[]>;
  bodyStart: number;
}

function parseHead(raw: Buffer): Head | undefined {
  const end = raw.indexOf(CRLF + CRLF);
  if (end < 0) return undefined;
  const [statusLine = '', ...fields] = raw.subarray(0, end).toString('latin1').split(CRLF);
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  if (match === null) return undefined;
  const headers: Record<string, string[]> = {};
  for (const field of fields) {
    const colon = field.indexOf(':');
    if (colon <= 0) continue;
    const name = field.slice(0, colon).trim().toLowerCase();
    (headers[name] ??= []).push(field.slice(colon + 1).trim());
  }
  return { status: Number(match[1]), headers, bodyStart: end + 4 };
}

/** Undoes chunked coding; `complete` says whether the last chunk arrived. */
function unchunk(raw: Buffer): { body: Buffer; complete: boolean } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = raw.indexOf(CRLF, at);
    if (lineEnd < 0) return { body: Buffer.concat(parts), complete: false };
    const size = Number.parseInt(raw.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isInteger(size) || size < 0) return { body: Buffer.concat(parts), complete: false };
    if (size === 0) return { body: Buffer.concat(parts), complete: raw.indexOf(CRLF, lineEnd + 2) >= 0 };
    const start = lineEnd + 2;
    if (raw.length < start + size) {
      parts.push(raw.subarray(start));
      return { body: Buffer.concat(parts), complete: false };
    }
    parts.push(raw.subarray(start, start + size));
    at = start + size + 2;
  }
}

function framedBody(head: Head, raw: Buffer): { body: Buffer; complete: boolean } {
  const rest = raw.subarray(head.bodyStart);
  if (head.headers['transfer-encoding']?.some((v) => v.toLowerCase().includes('chunked'))) return unchunk(rest);
  const length = head.headers['content-length']?.[0];
  if (length !== undefined) {
    const n = Number(length);
    return { body: rest.subarray(0, n), complete: rest.length >= n };
  }
  // Delimited by the connection closing.
  return { body: rest, complete: false };
}

function answerComplete(raw: Buffer): boolean {
  const head = parseHead(raw);
  return head !== undefined && framedBody(head, raw).complete;
}

function parseAnswer(raw: Buffer): Pick<RawAnswer, 'status' | 'headers' | 'body'> {
  const head = parseHead(raw);
  if (head === undefined) return { status: null, headers: {}, body: Buffer.alloc(0) };
  return { status: head.status, headers: head.headers, body: framedBody(head, raw).body };
}

/** The body as an HTTP client would hand it to its caller: content codings undone (or undefined when they cannot be). */
export function contentDecoded(answer: Pick<RawAnswer, 'headers' | 'body'>): Buffer | undefined {
  const codings = (answer.headers['content-encoding'] ?? [])
    .join(',')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  let out = answer.body;
  try {
    for (const coding of codings.reverse()) {
      if (coding === 'gzip' || coding === 'x-gzip') out = gunzipSync(out);
      else if (coding === 'deflate') out = inflateSync(out);
      else if (coding === 'br') out = brotliDecompressSync(out);
      else return undefined;
    }
  } catch {
    return undefined;
  }
  return out;
}

/** The body as JSON, or undefined. */
export function jsonOf(bytes: Buffer | undefined): unknown {
  if (bytes === undefined) return undefined;
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}
