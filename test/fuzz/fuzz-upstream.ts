import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { startSimulator, type Simulator } from '../simulator/index.ts';

/**
 * How the fuzzing upstream answers one request. `honest` is the simulator's answer for it;
 * every other kind breaks that answer in one way a provider, a network or a middlebox can.
 */
export type UpstreamFault =
  | { kind: 'honest' }
  /** The answer ends cleanly (framed as complete) after this fraction of its bytes. */
  | { kind: 'cut'; at: number; framing: 'length' | 'chunked' | 'close' }
  /** The connection is reset after this fraction of the body (0: right after the headers). */
  | { kind: 'reset'; at: number }
  /** The connection is reset before any byte of the answer. */
  | { kind: 'reset-before-headers' }
  /** The body is replaced by these bytes, under the honest content type. */
  | { kind: 'garbage'; bytes: Uint8Array }
  /** The honest body under another content type. */
  | { kind: 'retyped'; contentType: string }
  /** One event (or array element, or field of a whole answer) larger than the proxy's bounds. */
  | { kind: 'oversize' }
  /** An error status with this body. */
  | { kind: 'status'; status: number; body: string }
  /** Every usage count in the answer replaced by this JSON text. */
  | { kind: 'usage'; value: string }
  /** The honest answer compressed although the proxy asked for identity. */
  | { kind: 'encoded'; coding: 'gzip' | 'br' | 'deflate' }
  /** Headers and this fraction of the body, then nothing more until the proxy gives up. */
  | { kind: 'hang'; at: number }
  /** Declares a content-length larger than what it sends, then closes. */
  | { kind: 'short'; missing: number }
  /** A whole answer to a request that asked for a stream (a server ignoring the stream flag). */
  | { kind: 'unstreamed' }
  /** The answer behind a UTF-8 byte order mark, which fetch's `json()` skips and `JSON.parse` does not. */
  | { kind: 'bom' }
  /** Every text of the answer (whole, or each stream event) nested this deep in content parts. */
  | { kind: 'deep'; depth: number };

export interface UpstreamPlan {
  fault: UpstreamFault;
  /** The simulated model calls this tool. */
  toolCall?: string;
  /** Answer length in tokens (else 24). */
  outputTokens?: number;
  /** Pause before the status line. */
  firstByteDelayMs: number;
  /** The body goes out in this many pieces, each after `pieceDelayMs`. */
  pieces: number;
  pieceDelayMs: number;
}

/** One request that reached the upstream, and how it was answered. */
export interface Reached {
  method: string;
  /** Path and query as received. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The body received; emptied by `release` once it has been checked. */
  body: Buffer;
  bodyBytes: number;
  /** The status answered, or `reset` when the connection was reset before a status line. */
  answered: number | 'reset';
}

export interface FuzzUpstream {
  readonly url: string;
  /** The plan for the request carrying this `x-request-id`. */
  plan(requestId: string, plan: UpstreamPlan): void;
  /** What reached the upstream for a request id, in arrival order. */
  reached(requestId: string): readonly Reached[];
  /** Requests that arrived without a planned request id. */
  readonly strays: readonly Reached[];
  /** Drops the bodies held for a request id (a long run would hold every one). */
  release(requestId: string): void;
  close(): Promise<void>;
}

const HONEST: UpstreamPlan = { fault: { kind: 'honest' }, firstByteDelayMs: 0, pieces: 1, pieceDelayMs: 0 };

interface Wire {
  status: number;
  headers: [string, string][];
  body: Buffer;
}

function firstValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The simulator's answer to the request, with the plan's simulation headers. */
async function honestAnswer(sim: Simulator, reached: Reached, plan: UpstreamPlan, unstreamed: boolean): Promise<Wire> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reached.headers)) {
    if (
      value === undefined ||
      /^(host|connection|content-length|transfer-encoding|content-encoding|expect)$/.test(name)
    )
      continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  if (plan.toolCall !== undefined) headers['x-sim-tool-call'] = plan.toolCall;
  // Never the request's own bound: an agent may ask for a billion tokens.
  headers['x-sim-output-tokens'] = String(plan.outputTokens ?? 24);
  const method = reached.method;
  let path = reached.path;
  let sent = reached.body;
  if (unstreamed) {
    path = path.replace(':streamGenerateContent', ':generateContent').replace(/[?&]alt=sse/, '');
    try {
      sent = Buffer.from(JSON.stringify({ ...(JSON.parse(sent.toString('utf8')) as object), stream: false }));
    } catch {
      // not JSON: sent as it came
    }
  }
  const res = await fetch(sim.url + path, {
    method,
    headers,
    ...(method === 'GET' || method === 'HEAD' ? {} : { body: new Uint8Array(sent) }),
  });
  const body = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    headers: [['content-type', res.headers.get('content-type') ?? 'application/json']],
    body,
  };
}

/** Pads an answer past `bytes`: a huge first event of a stream, or a huge field of a whole answer. */
function oversized(wire: Wire, bytes: number): Buffer {
  const pad = 'x'.repeat(bytes + 1);
  const type = wire.headers[0]?.[1] ?? '';
  const text = wire.body.toString('utf8');
  if (type.includes('event-stream')) return Buffer.from(`data: {"pad":"${pad}"}\n\n${text}`);
  if (text.startsWith('[')) return Buffer.from(`[{"pad":"${pad}"},${text.slice(1)}`);
  if (text.startsWith('{')) return Buffer.from(`{"pad":"${pad}",${text.slice(1)}`);
  return Buffer.from(pad + text);
}

/** `value` with every string under `content` or `text` wrapped `depth` levels deep in content parts. */
function deepen(value: unknown, depth: number): unknown {
  if (Array.isArray(value)) return value.map((v) => deepen(v, depth));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if ((key === 'content' || key === 'text') && typeof v === 'string') {
      let nested: unknown = v;
      for (let i = 0; i < depth; i++) nested = [{ type: 'text', content: nested }];
      out[key] = nested;
    } else out[key] = deepen(v, depth);
  }
  return out;
}

/** Deepens a JSON answer, or each `data:` line of an event stream. */
function deepened(body: Buffer, depth: number): Buffer {
  const text = body.toString('utf8');
  const deep = (json: string) => {
    try {
      return JSON.stringify(deepen(JSON.parse(json), depth));
    } catch {
      return json;
    }
  };
  if (!text.includes('data:')) return Buffer.from(deep(text));
  return Buffer.from(text.replace(/^data: ?(.*)$/gm, (_line, json: string) => `data: ${deep(json)}`));
}

const USAGE_FIELDS =
  /"(prompt_tokens|completion_tokens|total_tokens|input_tokens|output_tokens|cached_tokens|cache_read_input_tokens|cache_creation_input_tokens|promptTokenCount|candidatesTokenCount|totalTokenCount|cachedContentTokenCount|thoughtsTokenCount)"\s*:\s*\d+/g;

function split(body: Buffer, pieces: number): Buffer[] {
  if (pieces <= 1 || body.length === 0) return [body];
  const size = Math.max(1, Math.ceil(body.length / pieces));
  const out: Buffer[] = [];
  for (let at = 0; at < body.length; at += size) out.push(body.subarray(at, at + size));
  return out;
}

function head(status: number, headers: readonly [string, string][]): Buffer {
  const lines = [`HTTP/1.1 ${status} Fuzz`, ...headers.map(([n, v]) => `${n}: ${v}`), 'connection: close'];
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

function chunk(bytes: Buffer): Buffer {
  return bytes.length === 0
    ? Buffer.alloc(0)
    : Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);
}

function write(socket: Socket, bytes: Buffer): Promise<void> {
  if (socket.destroyed || bytes.length === 0) return Promise.resolve();
  return new Promise((resolve) => socket.write(bytes, () => resolve()));
}

/**
 * A provider stand-in the fuzz suite controls: it records every request that reaches it (keyed
 * by `x-request-id`) and answers each as its plan says, writing raw bytes on the socket so it
 * can lie about lengths, cut, reset, stall or send garbage. Honest answers come from the
 * provider simulator. `limits` sizes the oversize faults past the proxy's bounds.
 */
export async function startFuzzUpstream(limits: { eventBytes: number; answerBytes: number }): Promise<FuzzUpstream> {
  const sim = await startSimulator();
  const plans = new Map<string, UpstreamPlan>();
  const reached = new Map<string, Reached[]>();
  const strays: Reached[] = [];
  const sockets = new Set<Socket>();

  async function answer(socket: Socket, record: Reached, plan: UpstreamPlan): Promise<void> {
    const { fault } = plan;
    if (plan.firstByteDelayMs > 0) await sleep(plan.firstByteDelayMs);
    if (fault.kind === 'reset-before-headers') {
      record.answered = 'reset';
      socket.resetAndDestroy();
      return;
    }
    let wire: Wire;
    if (fault.kind === 'status') {
      wire = { status: fault.status, headers: [['content-type', 'application/json']], body: Buffer.from(fault.body) };
    } else {
      wire = await honestAnswer(sim, record, plan, fault.kind === 'unstreamed');
    }
    let body = wire.body;
    const headers = [...wire.headers];
    let framing: 'length' | 'chunked' | 'close' = 'chunked';
    let end: 'clean' | 'reset' | 'hang' = 'clean';
    let cutAt = body.length;
    let declared: number | undefined;
    switch (fault.kind) {
      case 'cut':
        cutAt = Math.floor(body.length * fault.at);
        body = body.subarray(0, cutAt);
        framing = fault.framing;
        break;
      case 'reset':
        cutAt = Math.floor(body.length * fault.at);
        end = 'reset';
        break;
      case 'hang':
        cutAt = Math.floor(body.length * fault.at);
        end = 'hang';
        break;
      case 'garbage':
        body = Buffer.from(fault.bytes);
        framing = 'length';
        break;
      case 'retyped':
        headers[0] = ['content-type', fault.contentType];
        break;
      case 'oversize': {
        const type = headers[0]?.[1] ?? '';
        const stream = type.includes('event-stream') || body.toString('latin1', 0, 1) === '[';
        body = oversized(wire, stream ? limits.eventBytes : limits.answerBytes);
        break;
      }
      case 'usage':
        body = Buffer.from(
          body.toString('utf8').replace(USAGE_FIELDS, (_m, name: string) => `"${name}":${fault.value}`),
        );
        break;
      case 'encoded':
        body =
          fault.coding === 'gzip'
            ? gzipSync(body)
            : fault.coding === 'br'
              ? brotliCompressSync(body)
              : deflateSync(body);
        headers.push(['content-encoding', fault.coding]);
        framing = 'length';
        break;
      case 'deep':
        body = deepened(body, fault.depth);
        break;
      case 'bom':
        body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
        break;
      case 'short':
        declared = body.length + fault.missing;
        framing = 'length';
        break;
      default:
        break;
    }
    record.answered = wire.status;
    if (framing === 'length') headers.push(['content-length', String(declared ?? body.length)]);
    if (framing === 'chunked') headers.push(['transfer-encoding', 'chunked']);
    await write(socket, head(wire.status, headers));
    const sent = end === 'clean' ? body : body.subarray(0, cutAt);
    for (const piece of split(sent, plan.pieces)) {
      if (plan.pieceDelayMs > 0) await sleep(plan.pieceDelayMs);
      await write(socket, framing === 'chunked' ? chunk(piece) : piece);
    }
    if (end === 'reset') socket.resetAndDestroy();
    else if (end === 'clean') {
      if (framing === 'chunked') await write(socket, Buffer.from('0\r\n\r\n'));
      socket.end();
    }
    // A hanging answer stays open until the proxy closes the connection.
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => req.socket.destroy());
    req.on('end', () => {
      const record: Reached = {
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks),
        bodyBytes: 0,
        answered: 'reset',
      };
      record.bodyBytes = record.body.length;
      const id = firstValue(req.headers, 'x-request-id');
      const plan = id === undefined ? undefined : plans.get(id);
      if (id === undefined || plan === undefined) strays.push(record);
      else reached.set(id, [...(reached.get(id) ?? []), record]);
      // The answer is written raw; the response object is never used.
      res.detachSocket(req.socket);
      answer(req.socket, record, plan ?? HONEST).catch(() => req.socket.destroy());
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    plan: (id, plan) => plans.set(id, plan),
    reached: (id) => reached.get(id) ?? [],
    strays,
    release(id) {
      plans.delete(id);
      for (const record of reached.get(id) ?? []) record.body = Buffer.alloc(0);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await sim.close();
    },
  };
}
