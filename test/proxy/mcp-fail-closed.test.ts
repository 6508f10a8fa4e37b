import { request } from 'node:http';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import {
  gzipJsonAnswer,
  gzipSseAnswer,
  LISTED_TOOLS,
  startScriptedServer,
  startToolServer,
  type ScriptedAnswer,
  type ToolServer,
} from './mcp-server.ts';

const LIMIT = 64 * 1024;

let rig: ProxyRig;
let tools: ToolServer;
const scripted: { name: string; answer: (id: unknown) => ScriptedAnswer; stream?: ScriptedAnswer }[] = [
  { name: 'getstream', answer: gzipJsonAnswer, stream: gzipSseAnswer(99) },
  { name: 'gzipjson', answer: gzipJsonAnswer },
  { name: 'gzipsse', answer: gzipSseAnswer },
  {
    name: 'bigjson',
    answer: (id) => ({
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        JSON.stringify({ jsonrpc: '2.0', id, result: { tools: LISTED_TOOLS, padding: 'x'.repeat(2 * LIMIT) } }),
      ),
    }),
  },
  {
    name: 'bigsse',
    answer: (id) => ({
      headers: { 'content-type': 'text/event-stream' },
      body: Buffer.from(
        `data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { tools: LISTED_TOOLS, padding: 'x'.repeat(2 * LIMIT) } })}\n\n`,
      ),
    }),
  },
  {
    name: 'notjson',
    answer: (id) => ({
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"tools":${JSON.stringify(LISTED_TOOLS)}}}}`,
      ),
    }),
  },
  {
    name: 'dupkeys',
    answer: (id) => ({
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"tools":${JSON.stringify(LISTED_TOOLS)},"tools":[]}}`,
      ),
    }),
  },
];
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  tools = await startToolServer(true);
  closers.push(() => tools.close());
  const routes = [`json=${tools.url}`];
  for (const s of scripted) {
    const server = await startScriptedServer(s.answer, s.stream);
    closers.push(() => server.close());
    routes.push(`${s.name}=${server.url}`);
  }
  rig = await startProxyRig({
    proxy_mcp_servers: routes.join(','),
    proxy_body_limit_bytes: LIMIT,
    proxy_response_limit_bytes: LIMIT,
    proxy_stream_event_limit_bytes: LIMIT,
  });
  await rig.addPolicy({ name: 'no-deletes', rules: [{ action: 'tool:delete_repo', effect: 'deny' }], priority: 400 });
});
afterAll(async () => {
  await rig.close();
  for (const close of closers) await close();
});

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: unknown;
}

/** A raw HTTP request (POST unless `method` says otherwise) through the proxy's reverse route, body bytes exactly as given. */
function post(
  server: string,
  body: Buffer | string | null,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<RawAnswer> {
  const url = new URL(`${rig.addresses.proxyUrl}/mcp/${server}/mcp`);
  const bytes = typeof body === 'string' ? Buffer.from(body) : (body ?? Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(body === null ? {} : { 'content-length': String(bytes.length) }),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(bytes);
  });
}

const call = (name: unknown, id: unknown = 1) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

function errorOf(answer: RawAnswer): { code: number; message: string; data: { code: string } } {
  return (answer.json as { error: { code: number; message: string; data: { code: string } } }).error;
}

/** Runs `send` and reports what the MCP server executed meanwhile. */
async function executedDuring(send: () => Promise<RawAnswer>): Promise<{ answer: RawAnswer; ran: string[] }> {
  const before = tools.calls.length;
  const answer = await send();
  return { answer, ran: tools.calls.slice(before) };
}

describe('MCP bodies the proxy must decode before it governs them', () => {
  it('governs a plain call (the raw client reaches the real server)', async () => {
    const allowed = await executedDuring(() => post('json', call('search')));
    expect(allowed.ran).toEqual(['search']);
    const denied = await executedDuring(() => post('json', call('delete_repo')));
    expect(errorOf(denied.answer)).toMatchObject({ code: -32000, data: { code: 'SVC-POL-2001' } });
    expect(denied.ran).toEqual([]);
  });

  it('governs a call whose body starts with a UTF-8 byte order mark', async () => {
    const denied = await executedDuring(() => post('json', Buffer.concat([BOM, Buffer.from(call('delete_repo'))])));
    expect(errorOf(denied.answer)).toMatchObject({ code: -32000, data: { code: 'SVC-POL-2001' } });
    expect(denied.ran).toEqual([]);
    const allowed = await executedDuring(() => post('json', Buffer.concat([BOM, Buffer.from(call('search'))])));
    expect(allowed.ran).toEqual(['search']);
  });

  it('governs a call sent in another charset, and forwards it as UTF-8', async () => {
    const utf16 = { 'content-type': 'application/json; charset=utf-16le' };
    const denied = await executedDuring(() => post('json', Buffer.from(call('delete_repo'), 'utf16le'), utf16));
    expect(errorOf(denied.answer).data.code).toBe('SVC-POL-2001');
    expect(denied.ran).toEqual([]);
    const allowed = await executedDuring(() => post('json', Buffer.from(call('search'), 'utf16le'), utf16));
    expect(allowed.ran).toEqual(['search']);
  });

  it('governs gzip, br and stacked bodies, and forwards them decoded', async () => {
    for (const [encoding, encode] of [
      ['gzip', (b: Buffer) => gzipSync(b)],
      ['br', (b: Buffer) => brotliCompressSync(b)],
      ['gzip, br', (b: Buffer) => brotliCompressSync(gzipSync(b))],
    ] as const) {
      const headers = { 'content-encoding': encoding };
      const denied = await executedDuring(() => post('json', encode(Buffer.from(call('delete_repo'))), headers));
      expect(errorOf(denied.answer).data.code, encoding).toBe('SVC-POL-2001');
      expect(denied.ran).toEqual([]);
      const allowed = await executedDuring(() => post('json', encode(Buffer.from(call('search'))), headers));
      expect(allowed.ran, encoding).toEqual(['search']);
    }
  });

  it('governs a call sent with another method, and a tool name in another case', async () => {
    const put = await executedDuring(() => post('json', call('delete_repo'), {}, 'PUT'));
    expect(errorOf(put.answer).data.code).toBe('SVC-POL-2001');
    const upper = await executedDuring(() => post('json', call('Delete_Repo')));
    expect(errorOf(upper.answer)).toMatchObject({ data: { code: 'SVC-POL-2001', denied_action: 'tool:Delete_Repo' } });
    expect([...put.ran, ...upper.ran]).toEqual([]);
  });

  it('governs a tool a policy names with capitals when it is called in lower case', async () => {
    await rig.addPolicy({ name: 'no-wipe', priority: 600, rules: [{ action: 'tool:WipeDisk', effect: 'deny' }] });
    await rig.addPolicy({
      name: 'no-rename',
      priority: 600,
      rules: [
        {
          action: 'tool:*',
          effect: 'deny',
          conditions: [{ field: 'tool_name', operator: 'in', value: ['RenameDisk'] }],
        },
      ],
    });
    for (const name of ['wipedisk', 'WIPEDISK', 'renamedisk', 'RENAMEDISK']) {
      const denied = await executedDuring(() => post('json', call(name)));
      expect(errorOf(denied.answer).data.code, name).toBe('SVC-POL-2001');
      expect(denied.ran, name).toEqual([]);
    }
  });

  it('evaluates every call of a batch: one denied call refuses the batch, every request answered', async () => {
    const batch = `[${call('search', 1)},${call('delete_repo', 2)}]`;
    const refused = await executedDuring(() => post('json', batch));
    expect(refused.ran).toEqual([]);
    const answers = refused.answer.json as { id: number; error: { data: { code: string } } }[];
    expect(answers.map((a) => [a.id, a.error.data.code])).toEqual([
      [1, 'SVC-POL-2001'],
      [2, 'SVC-POL-2001'],
    ]);
    const allowed = await executedDuring(() => post('json', `[${call('search', 1)},${call('search', 2)}]`));
    expect(allowed.ran).toEqual(['search', 'search']);
  });

  it.each([
    [
      'a method in another case',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'Tools/Call', params: { name: 'delete_repo' } }),
      -32600,
    ],
    ['a non-string tool name', call(['delete_repo']), -32602],
    [
      'params as an array',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: ['delete_repo', {}] }),
      -32602,
    ],
    // A server decoding without regard to case (Go's encoding/json) reads these as a call.
    [
      'a method key in another case beside a harmless one',
      '{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"delete_repo"}}',
      -32700,
    ],
    [
      'a tool name key in another case beside an allowed name',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","NAME":"delete_repo"}}',
      -32700,
    ],
    [
      'message keys written only in another case',
      '{"jsonrpc":"2.0","id":1,"Method":"tools/call","Params":{"Name":"delete_repo"}}',
      -32600,
    ],
    [
      'a tool name key written only in another case',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\u212Aey":1,"Name":"delete_repo"}}',
      -32602,
    ],
  ])('refuses %s without forwarding it', async (_label, body, rpcCode) => {
    const before = tools.requests;
    const { answer, ran } = await executedDuring(() => post('json', body));
    expect(errorOf(answer)).toMatchObject({ code: rpcCode, data: { code: 'SVC-SYS-9002' } });
    expect(ran).toEqual([]);
    expect(tools.requests).toBe(before);
  });

  it.each([
    [
      'a key given twice',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo","name":"search"}}',
      {},
    ],
    [
      'bytes invalid in UTF-8',
      Buffer.concat([Buffer.from(call('delete_repo').slice(0, -1)), Buffer.from([0xff, 0x7d])]),
      {},
    ],
    ['an unknown content-encoding', call('delete_repo'), { 'content-encoding': 'compress' }],
    ['corrupt gzip', call('delete_repo'), { 'content-encoding': 'gzip' }],
    ['an unknown charset', call('delete_repo'), { 'content-type': 'application/json; charset=x-unknown' }],
    [
      'a BOM contradicting the charset',
      Buffer.concat([BOM, Buffer.from(call('delete_repo'))]),
      { 'content-type': 'application/json; charset=utf-16be' },
    ],
    ['a body that is not JSON', 'method=tools/call&name=delete_repo', {}],
    [
      'arguments nested too deep to be written again',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo","arguments":{"pad":${'['.repeat(6000)}${']'.repeat(6000)}}}}`,
      {},
    ],
  ])('answers %s with a JSON-RPC parse error and forwards nothing', async (_label, body, headers) => {
    const before = tools.requests;
    const { answer, ran } = await executedDuring(() => post('json', body, headers));
    expect(answer.status).toBe(400);
    expect(errorOf(answer)).toMatchObject({ code: -32700, data: { code: 'SVC-SYS-9002' } });
    expect((answer.json as { id: unknown }).id).toBeNull();
    expect(ran).toEqual([]);
    expect(tools.requests).toBe(before);
  });

  it('refuses a body over the limit, and a compressed bomb once it inflates past it, with 413 SVC-SYS-9009', async () => {
    const before = tools.requests;
    const big = await post('json', call('x'.repeat(LIMIT)));
    expect(big.status).toBe(413);
    expect(errorOf(big).data.code).toBe('SVC-SYS-9009');
    const bomb = gzipSync(Buffer.alloc(48 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(LIMIT);
    const inflated = await post('json', bomb, { 'content-encoding': 'gzip' });
    expect(inflated.status).toBe(413);
    expect(errorOf(inflated).data.code).toBe('SVC-SYS-9009');
    expect(tools.requests).toBe(before);
    expect((await executedDuring(() => post('json', call('search')))).ran).toEqual(['search']);
  });
});

describe('tools/list answers the proxy must read before it relays them', () => {
  const list = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' });

  async function listThroughSdk(server: string): Promise<string[]> {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${rig.addresses.proxyUrl}/mcp/${server}/mcp`)));
    try {
      return (await client.listTools()).tools.map((t) => t.name);
    } finally {
      await client.close();
    }
  }

  it('filters a gzip-encoded JSON answer, and a gzip-encoded SSE answer, for the official SDK client', async () => {
    expect(await listThroughSdk('gzipjson')).toEqual(['search']);
    expect(await listThroughSdk('gzipsse')).toEqual(['search']);
  });

  it('relays a filtered answer decoded: no content-encoding left on it', async () => {
    const answer = await post('gzipjson', list);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect((answer.json as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name)).toEqual([
      'search',
    ]);
  });

  it('refuses a JSON answer over the answer limit with a JSON-RPC error for the request', async () => {
    const answer = await post('bigjson', list);
    expect(answer.json).toMatchObject({ id: 7, error: { data: { code: 'SVC-SYS-9009' } } });
    expect(answer.text).not.toContain('delete_repo');
  });

  it('ends an SSE answer whose event passes the event limit with a JSON-RPC error event', async () => {
    const answer = await post('bigsse', list);
    expect(answer.text).not.toContain('delete_repo');
    const data = answer.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as unknown);
    expect(data).toEqual([
      expect.objectContaining({ id: 7, error: expect.objectContaining({ data: { code: 'SVC-SYS-9009' } }) }),
    ]);
  });

  it('filters a tools list arriving on the GET event stream', async () => {
    const answer = await post('getstream', null, { accept: 'text/event-stream' }, 'GET');
    expect(answer.headers['content-encoding']).toBeUndefined();
    const data = answer.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as { result: { tools: { name: string }[] } });
    expect(data.map((d) => d.result.tools.map((t) => t.name))).toEqual([['search']]);
  });

  it.each(['notjson', 'dupkeys'])('refuses a %s answer instead of relaying it unfiltered', async (server) => {
    const answer = await post(server, list);
    expect(answer.json).toMatchObject({ id: 7, error: { data: { code: 'SVC-ADP-5001' } } });
    expect(answer.text).not.toContain('delete_repo');
  });
});
