import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { headerValue, legalHeaderValue, oddValue, sometimes } from './provider-requests.ts';
import type { RawRequest } from './raw-http.ts';

/** The tool a policy denies on the MCP server: it must never run. */
export const DENIED_MCP_TOOL = 'delete_repo';

/** Names a lenient server might take for the denied tool, and plain ones. */
const toolName: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('search', DENIED_MCP_TOOL) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'Delete_Repo',
      'DELETE_REPO',
      'delete_repo ',
      ' delete_repo',
      'delete\u200brepo',
      'delete_rep\u043e',
      'ｄｅｌｅｔｅ_ｒｅｐｏ',
      'delete_repo\u0000',
      'delete/repo',
      'search\ndelete_repo',
      '',
    ),
  },
  { weight: 1, arbitrary: oddValue },
  { weight: 1, arbitrary: fc.constantFrom(['delete_repo'], { name: 'delete_repo' }, 0, null, true) },
);

/** Methods: the governed ones, their near-misses (case, spacing, invisible characters), others, non-strings. */
const method: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: fc.constant('tools/call') },
  { weight: 3, arbitrary: fc.constantFrom('tools/list', 'initialize', 'ping', 'notifications/initialized') },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'Tools/Call',
      'TOOLS/CALL',
      'tools/call ',
      ' tools/call',
      'tools\u200b/call',
      'tools／call',
      'tools/Call',
      'tools//call',
      'tools/calls',
      'tools/list\u0000',
      'Tools/List',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(123, null, ['tools/call'], { name: 'tools/call' }, true) },
);

const rpcId: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 1_000_000 }) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, 1.5, -1, 2 ** 53 + 2, 1e308, true, [], {}, [1], { id: 1 }) },
);

const params: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      { name: toolName, arguments: fc.oneof(fc.constant({}), fc.jsonValue({ maxDepth: 2 })) },
      { requiredKeys: ['name'] },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom([DENIED_MCP_TOOL, {}], ['search'], null, 'delete_repo', 0) },
);

/** One JSON-RPC message as a value; `undefined` fields are left out. */
const message: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    jsonrpc: fc.oneof({ weight: 8, arbitrary: fc.constant('2.0') }, fc.constantFrom('1.0', 2, undefined, '')),
    id: fc.oneof({ weight: 5, arbitrary: rpcId }, fc.constant(undefined)),
    method,
    params: fc.oneof({ weight: 8, arbitrary: params }, fc.constant(undefined)),
  })
  .map((m) => Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)));

/** A body's JSON value: one message, a batch, a batch holding a batch, or anything at all. */
const payload: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: message },
  { weight: 3, arbitrary: fc.array(message, { minLength: 1, maxLength: 4 }) },
  { weight: 1, arbitrary: fc.tuple(message, fc.array(message, { maxLength: 2 })).map(([m, inner]) => [m, inner]) },
  { weight: 1, arbitrary: fc.constantFrom([], {}, null, 'tools/call', [[]]) },
);

/** Text-level changes a serializer never makes: repeated keys (plain or escaped), truncation, noise. */
const damage: fc.Arbitrary<(text: string) => string> = fc.oneof(
  { weight: 8, arbitrary: fc.constant((t: string) => t) },
  fc.constantFrom(
    (t: string) => t.replace('"name":"search"', '"name":"search","name":"delete_repo"'),
    (t: string) => t.replace('"name":"search"', '"name":"delete_repo","name":"search"'),
    (t: string) => t.replace('"name":"search"', '"name":"search","na\\u006de":"delete_repo"'),
    (t: string) => t.replace('"method":"tools/list"', '"method":"tools/list","method":"tools/call"'),
    (t: string) => t.replace('"method":', '"met\\u0068od":'),
    (t: string) => t.replace('{', '{"params":{"name":"delete_repo"},'),
    (t: string) => t.replace(/"name":"([^"]*)"/, '"name":"$1","arguments":{},"name":"delete_repo"'),
    (t: string) => `${t} `,
    (t: string) => `${t}${t}`,
    (t: string) => t.slice(0, Math.floor(t.length / 2)),
    (t: string) => t.replace(/"/g, "'"),
  ),
);

type Encoded = { bytes: Buffer; headers: [string, string][] };
const json = (extra: [string, string][] = []): [string, string][] => [['content-type', 'application/json'], ...extra];

/** How the text becomes bytes and what the headers claim about them. */
const encoding: fc.Arbitrary<(text: string) => Encoded> = fc.oneof(
  { weight: 10, arbitrary: fc.constant((t: string) => ({ bytes: Buffer.from(t), headers: json() })) },
  fc.constantFrom(
    (t: string) => ({ bytes: Buffer.from(`\ufeff${t}`), headers: json() }),
    (t: string) => ({ bytes: Buffer.from(`\ufeff${t}`, 'utf16le'), headers: json() }),
    (t: string) => ({
      bytes: Buffer.from(t, 'utf16le'),
      headers: [['content-type', 'application/json; charset=utf-16le']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t, 'latin1'),
      headers: [['content-type', 'application/json; charset=iso-8859-1']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(t),
      headers: [['content-type', 'application/json; charset=x-nonsense']] as [string, string][],
    }),
    (t: string) => ({
      bytes: Buffer.from(`\ufeff${t}`, 'utf16le'),
      headers: [['content-type', 'application/json; charset=utf-8']] as [string, string][],
    }),
    (t: string) => ({ bytes: gzipSync(t), headers: json([['content-encoding', 'gzip']]) }),
    (t: string) => ({ bytes: brotliCompressSync(t), headers: json([['content-encoding', 'br']]) }),
    (t: string) => ({ bytes: deflateSync(t), headers: json([['content-encoding', 'deflate']]) }),
    (t: string) => ({ bytes: gzipSync(brotliCompressSync(t)), headers: json([['content-encoding', 'br, gzip']]) }),
    (t: string) => ({ bytes: Buffer.from(t), headers: json([['content-encoding', 'gzip']]) }),
    (t: string) => ({ bytes: Buffer.from(t), headers: json([['content-encoding', 'compress']]) }),
    (t: string) => ({ bytes: gzipSync(t), headers: json() }),
    // Small on the wire, past the body limit once inflated.
    (t: string) => ({ bytes: gzipSync(`${t}${' '.repeat(300_000)}`), headers: json([['content-encoding', 'gzip']]) }),
    (t: string) => ({ bytes: Buffer.from(`${t}${' '.repeat(100_000)}`), headers: json() }),
    (t: string) => ({ bytes: Buffer.from(t), headers: [['content-type', 'text/plain']] as [string, string][] }),
    (t: string) => ({ bytes: Buffer.from(t), headers: [] as [string, string][] }),
  ),
);

export interface McpRequest {
  raw: RawRequest;
  /** The listener and HTTP parser may refuse it before the MCP path sees it. */
  broken: boolean;
  summary: string;
}

export interface McpPools {
  /** Where the proxy serves each MCP server: reverse paths and forward URLs. */
  targets: readonly { target: string; host: string }[];
  boundBudgets: readonly string[];
  unboundBudget: string;
}

/** One request to a governed MCP server through the proxy. */
export function mcpRequests(pools: McpPools): fc.Arbitrary<McpRequest> {
  return fc
    .record({
      where: fc.constantFrom(...pools.targets),
      httpMethod: fc.oneof({ weight: 12, arbitrary: fc.constant('POST') }, fc.constantFrom('GET', 'PUT', 'DELETE')),
      payload,
      damage,
      encode: encoding,
      accept: fc.oneof(
        { weight: 8, arbitrary: fc.constant('application/json, text/event-stream') },
        fc.constantFrom('application/json', 'text/event-stream', '*/*', ''),
      ),
      governance: sometimes(
        fc.array(
          fc.tuple(
            fc.constantFrom('x-svc-budget-id', 'x-svc-execution-id', 'x-svc-envelope-id', 'mcp-session-id'),
            fc.oneof(
              fc.constantFrom(...pools.boundBudgets, pools.unboundBudget, 'no-such-budget'),
              headerValue.map((h) => h.value).filter(legalHeaderValue),
            ),
          ),
          { minLength: 1, maxLength: 3 },
        ),
        3,
        [] as [string, string][],
      ),
      chunked: fc.boolean().map((b) => b),
    })
    .map(({ where, httpMethod, payload: value, damage: dmg, encode, accept, governance, chunked }): McpRequest => {
      const text = dmg(JSON.stringify(value) ?? 'null');
      const encoded = httpMethod === 'GET' ? { bytes: Buffer.alloc(0), headers: [] } : encode(text);
      const headers: [string, string][] = [['host', where.host], ...encoded.headers];
      if (accept !== '') headers.push(['accept', accept]);
      headers.push(...governance);
      const long = governance.some(([, v]) => v.length > 4000);
      return {
        raw: {
          method: httpMethod,
          target: where.target,
          headers,
          body: encoded.bytes,
          framing: chunked && encoded.bytes.length > 0 ? { kind: 'chunked' } : { kind: 'length' },
        },
        broken: long,
        summary: `${httpMethod} ${where.target} headers=${JSON.stringify(headers.map(([n, v]) => [n, v.slice(0, 60)]))} body(${encoded.bytes.length})=${JSON.stringify(text.slice(0, 400))}`,
      };
    });
}
