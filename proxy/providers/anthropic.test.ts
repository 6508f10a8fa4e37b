import { describe, expect, it } from 'vitest';
import type { SvcError } from '../../core/errors/index.ts';
import { decodeText, useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import { captureRaw, pushChunk, runMeter, splitAt } from '../../test/simulator/index.ts';
import { sse } from '../../test/simulator/sse-writer.ts';
import { UNLIMITED_HOSTED_USES } from './adapter.ts';
import { createAnthropicAdapter } from './anthropic.ts';
import { IMAGE_TOKENS } from './non-text-input.ts';

const fx = useAdapterFixture();
const anthropic = createAnthropicAdapter(fx.deps);
const body = { model: 'claude-3-5-haiku-20241022', max_tokens: 6, messages: [{ role: 'user', content: 'Hello' }] };

describe('Anthropic classify and parseRequest', () => {
  it('meters only message creation', () => {
    expect(anthropic.classify('POST', '/v1/messages')).toBe('messages');
    expect(anthropic.classify('POST', '/v1/messages/count_tokens')).toBeNull();
    expect(anthropic.classify('POST', '/v1/messages/batches')).toBeNull();
    expect(anthropic.classify('GET', '/v1/messages')).toBeNull();
  });

  it('reads model, limit, tools and estimates input with system and blocks', () => {
    const parsed = anthropic.parseRequest(
      'messages',
      {
        ...body,
        system: [{ type: 'text', text: 'You are terse.' }],
        stream: true,
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'Find it' }] },
          { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'search', input: { q: 'x' } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'found' }] },
        ],
        tools: [{ name: 'search', input_schema: { type: 'object' } }],
      },
      '/v1/messages',
    );
    expect(parsed).toMatchObject({ model: body.model, stream: true, maxOutputTokens: 6, declaredTools: ['search'] });
    const withoutTools = fx.tokens.countChatMessages(body.model, [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Find it' },
      { role: 'assistant', content: 'search{"q":"x"}' },
      { role: 'user', content: 'found' },
    ]);
    expect(parsed.estimatedInputTokens).toBe(
      withoutTools +
        fx.tokens.countText(body.model, JSON.stringify([{ name: 'search', input_schema: { type: 'object' } }])),
    );
  });

  it('holds documents, images and unknown blocks at least at their bounds, inline text at its bytes', () => {
    const unknown = fx.deps.serverContextTokens;
    const parse = (content: unknown[], system?: unknown[]) =>
      anthropic.parseRequest(
        'messages',
        {
          ...body,
          model: 'claude-sonnet-4-20250514',
          messages: [{ role: 'user', content }],
          ...(system ? { system } : {}),
        },
        '/v1/messages',
      ).estimatedInputTokens;
    const text = 'x '.repeat(100_000);
    expect(
      parse([{ type: 'document', source: { type: 'url', url: 'https://example.com/huge.pdf' } }]),
    ).toBeGreaterThanOrEqual(unknown);
    expect(parse([{ type: 'document', source: { type: 'file', file_id: 'file_1' } }])).toBeGreaterThanOrEqual(unknown);
    expect(
      parse([{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBER' } }]),
    ).toBeGreaterThanOrEqual(unknown);
    expect(
      parse([{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: text } }]),
    ).toBeGreaterThanOrEqual(text.length);
    expect(
      parse([{ type: 'document', source: { type: 'content', content: [{ type: 'text', text }] } }]),
    ).toBeGreaterThanOrEqual(text.length);
    expect(
      parse([{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }]),
    ).toBeGreaterThanOrEqual(IMAGE_TOKENS.anthropic);
    expect(
      parse([
        { type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] },
      ]),
    ).toBeGreaterThanOrEqual(IMAGE_TOKENS.anthropic);
    expect(parse([{ type: 'container_upload', file_id: 'file_1' }])).toBeGreaterThanOrEqual(unknown);
    expect(
      parse([{ type: 'text', text: 'hi' }], [{ type: 'document', source: { type: 'url', url: 'u' } }]),
    ).toBeGreaterThanOrEqual(unknown);
  });

  it('holds replayed web search and fetch results at their bytes, not at the allowance of an unknown block', () => {
    const parse = (content: unknown[]) =>
      anthropic.parseRequest(
        'messages',
        { ...body, model: 'claude-sonnet-4-20250514', messages: [{ role: 'assistant', content }] },
        '/v1/messages',
      ).estimatedInputTokens;
    const none = parse([]);
    // The UTF-8 bytes of every string and key a block holds.
    const bytes = (value: unknown): number =>
      typeof value === 'string'
        ? Buffer.byteLength(value)
        : Array.isArray(value)
          ? value.reduce((sum: number, v) => sum + bytes(v), 0)
          : typeof value === 'object' && value !== null
            ? Object.entries(value).reduce((sum: number, [k, v]) => sum + Buffer.byteLength(k) + bytes(v), 0)
            : 0;
    const result = (i: number) => ({
      type: 'web_search_result',
      url: `https://example.com/page-${i}`,
      title: `Page ${i} — résumé`,
      encrypted_content: 'EqQBCioIAxgCIiQ'.repeat(300),
      page_age: 'April 30, 2025',
    });
    const search = {
      type: 'web_search_tool_result',
      tool_use_id: 'srvtoolu_1',
      content: [0, 1, 2, 3, 4].map(result),
    };
    expect(parse([search])).toBe(none + bytes(search));
    expect(parse([search, search, search])).toBe(none + 3 * bytes(search));
    expect(parse([search, search, search])).toBeLessThan(fx.deps.serverContextTokens);
    const failed = {
      type: 'web_search_tool_result',
      tool_use_id: 'srvtoolu_2',
      content: { type: 'web_search_tool_result_error', error_code: 'max_uses_exceeded' },
    };
    expect(parse([failed])).toBe(none + bytes(failed));

    const page = 'The page as text. '.repeat(2_000);
    const fetched = (source: object) => ({
      type: 'web_fetch_tool_result',
      tool_use_id: 'srvtoolu_3',
      content: {
        type: 'web_fetch_result',
        url: 'https://example.com/page',
        retrieved_at: '2025-08-25T10:30:00Z',
        content: { type: 'document', source, title: 'A page' },
      },
    });
    const text = fetched({ type: 'text', media_type: 'text/plain', data: page });
    expect(parse([text])).toBe(none + bytes(text));
    // A fetched PDF is compressed: of unknown size, as any PDF.
    const pdf = fetched({ type: 'base64', media_type: 'application/pdf', data: 'JVBER' });
    expect(parse([pdf])).toBeGreaterThanOrEqual(none + fx.deps.serverContextTokens);
    // What the proxy does not know among the results stays at the allowance.
    const novel = { ...search, content: [{ type: 'web_search_result_of_tomorrow', url: 'u' }] };
    expect(parse([novel])).toBeGreaterThanOrEqual(none + fx.deps.serverContextTokens);
  });

  it('declares server tools by name and remote MCP servers as mcp, built in, without their credentials', () => {
    const declared = (extra: object) => anthropic.parseRequest('messages', { ...body, ...extra }, '/v1/messages');
    const server = { type: 'url', url: 'https://mcp.example.com/sse', name: 'example', authorization_token: 'sk-1' };
    const mcp = { name: 'mcp', arguments: '{"name":"example","url":"https://mcp.example.com/sse"}' };
    expect(
      declared({
        tools: [
          { name: 'lookup', input_schema: { type: 'object' } },
          { type: 'custom', name: 'search', input_schema: { type: 'object' } },
          { type: 'web_search_20250305', name: 'web_search' },
          { type: 'bash_20250124', name: 'bash' },
          { type: 'mcp_toolset', mcp_server_name: 'example' },
        ],
        mcp_servers: [server],
      }),
    ).toMatchObject({
      declaredTools: ['lookup', 'search', 'web_search', 'bash', 'mcp'],
      builtinTools: [{ name: 'web_search', arguments: '' }, { name: 'bash', arguments: '' }, mcp],
    });
    expect(declared({ mcp_servers: [server] })).toMatchObject({ declaredTools: ['mcp'], builtinTools: [mcp] });
    // The tools a server may call are judged by name too.
    const restricted = { ...server, tool_configuration: { enabled: true, allowed_tools: ['delete_repo'] } };
    const args = JSON.stringify({
      name: 'example',
      url: server.url,
      tool_configuration: restricted.tool_configuration,
    });
    expect(declared({ mcp_servers: [restricted] })).toMatchObject({
      declaredTools: ['mcp', 'delete_repo'],
      builtinTools: [
        { name: 'mcp', arguments: args },
        { name: 'delete_repo', arguments: args },
      ],
    });
  });

  it('names each remote MCP server not restricted to tools by a list it reads, unless its tools are off', () => {
    const unlisted = (server: object) =>
      anthropic.parseRequest(
        'messages',
        {
          ...body,
          mcp_servers: [
            { type: 'url', url: 'https://a.example/sse', name: 'a', tool_configuration: { allowed_tools: ['x'] } },
            { type: 'url', url: 'https://mcp.example.com/sse', name: 'b', ...server },
          ],
        },
        '/v1/messages',
      ).unlistedMcpServers;
    for (const server of [
      {},
      { tool_configuration: null },
      { tool_configuration: { enabled: true } },
      { tool_configuration: { enabled: 'false' } },
      { tool_configuration: { allowed_tools: [{ name: 'x' }] } },
      { tool_configuration: { allowed_tools: { tool_names: ['x'], only: true } } },
    ])
      expect(unlisted(server), JSON.stringify(server)).toEqual(['mcp_servers[1].tool_configuration.allowed_tools']);
    for (const server of [{ tool_configuration: { allowed_tools: [] } }, { tool_configuration: { enabled: false } }])
      expect(unlisted(server), JSON.stringify(server)).toBeUndefined();
  });

  it("reads an MCP toolset's tools as the list of its server, when it lists them", () => {
    const server = { type: 'url', url: 'https://mcp.example.com/sse', name: 'gh' };
    const parse = (toolset: object) =>
      anthropic.parseRequest(
        'messages',
        {
          ...body,
          tools: [
            { name: 'lookup', input_schema: {} },
            { type: 'mcp_toolset', mcp_server_name: 'gh', ...toolset },
          ],
          mcp_servers: [server],
        },
        '/v1/messages',
      );
    const off = { default_config: { enabled: false } };
    const judged = (toolset: object) => parse(toolset).builtinTools.map((t) => t.name);
    expect(judged({ ...off, configs: { list_issues: { enabled: true }, delete_repo: { enabled: false } } })).toEqual([
      'mcp',
      'list_issues',
    ]);
    expect(
      judged({
        tools: [{ name: 'list_issues' }, { name: 'delete_repo' }],
        configs: { list_issues: { enabled: false } },
      }),
    ).toEqual(['mcp', 'delete_repo']);
    expect(judged({ ...off, tools: [{ name: 'list_issues' }], configs: { list_issues: { enabled: true } } })).toEqual([
      'mcp',
      'list_issues',
    ]);
    expect(parse(off).unlistedMcpServers).toBeUndefined();
    for (const toolset of [
      {},
      { default_config: { enabled: true }, configs: { delete_repo: { enabled: false } } },
      { ...off, configs: ['list_issues'] },
      { tools: [{ title: 'list_issues' }] },
      { tools: { name: 'list_issues' } },
    ])
      expect(parse(toolset).unlistedMcpServers, JSON.stringify(toolset)).toEqual(['tools[1].default_config.enabled']);
    // A toolset for another server restricts none of this one's tools.
    expect(parse({ ...off, mcp_server_name: 'other' }).unlistedMcpServers).toEqual([
      'mcp_servers[0].tool_configuration.allowed_tools',
    ]);
  });

  it('reserves web search for its max_uses, else for the unlimited bound', () => {
    const search = (extra: object) => ({
      ...body,
      tools: [
        { type: 'web_search_20250305', name: 'web_search', ...extra },
        { name: 'lookup', input_schema: {} },
      ],
    });
    expect(anthropic.parseRequest('messages', search({ max_uses: 3 }), '/v1/messages').hostedUses).toEqual({
      web_search: 3,
    });
    expect(anthropic.parseRequest('messages', search({}), '/v1/messages').hostedUses).toEqual({
      web_search: UNLIMITED_HOSTED_USES,
    });
    expect(anthropic.parseRequest('messages', body, '/v1/messages').hostedUses).toBeUndefined();
  });

  it('says how long a prompt marked for caching asks to be kept, the longest of its marks', () => {
    const caching = (extra: object) =>
      anthropic.parseRequest('messages', { ...body, ...extra }, '/v1/messages').promptCaching;
    const short = { type: 'ephemeral' };
    const hour = { type: 'ephemeral', ttl: '1h' };
    expect(caching({})).toBeUndefined();
    expect(caching({ system: [{ type: 'text', text: 's', cache_control: short }] })).toBe('short');
    expect(
      caching({ system: 'plain', tools: [{ name: 'a', input_schema: {}, cache_control: { ...short, ttl: '5m' } }] }),
    ).toBe('short');
    expect(
      caching({
        system: [{ type: 'text', text: 's', cache_control: short }],
        tools: [{ name: 'a', cache_control: hour }],
      }),
    ).toBe('long');
    const result = {
      type: 'tool_result',
      tool_use_id: 't1',
      content: [{ type: 'text', text: 'r', cache_control: hour }],
    };
    expect(caching({ messages: [{ role: 'user', content: [result] }] })).toBe('long');
    // A time it does not know is taken as the long one, the dearer to write.
    expect(
      caching({
        messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { ...short, ttl: '2h' } }] }],
      }),
    ).toBe('long');
  });

  it('requires max_tokens, naming it', () => {
    try {
      anthropic.parseRequest('messages', { model: 'claude-sonnet-4', messages: [] }, '/v1/messages');
      expect.unreachable();
    } catch (err) {
      expect((err as SvcError).code).toBe('SVC-SYS-9002');
      expect((err as SvcError).fieldViolations.map((v) => v.field)).toEqual(['max_tokens']);
    }
  });
});

describe('Anthropic readResponse', () => {
  it('counts cache reads into input and reads tool_use', async () => {
    const raw = await captureRaw(fx.sim, '/v1/messages', body, {
      'x-sim-cached-tokens': '5',
      'x-sim-input-tokens': '20',
      'x-sim-tool-call': 'search',
    });
    const reading = anthropic.readResponse('messages', JSON.parse(decodeText(raw)));
    expect(reading).toEqual({
      usage: { input: 20, output: 6, cachedInput: 5 },
      usageSource: 'provider',
      toolCalls: [{ name: 'search', arguments: expect.stringMatching(/^\{.*\}$/) }],
      model: body.model,
    });
    expect(fx.sim.requests.at(-1)?.usageSent).toEqual(reading.usage);
  });

  it('counts cache writes into input, by how long they are kept, whole and streamed', async () => {
    const headers = {
      'x-sim-input-tokens': '100',
      'x-sim-cache-write-tokens': '30',
      'x-sim-cache-write-long-tokens': '20',
    };
    const whole = anthropic.readResponse(
      'messages',
      JSON.parse(decodeText(await captureRaw(fx.sim, '/v1/messages', body, headers))),
    );
    expect(whole.usage).toEqual({ input: 100, output: 6, cachedInput: 0, cacheWrite: 30, cacheWriteLong: 20 });
    const streamed = await runMeter(
      anthropic.createStreamMeter('messages', body.model),
      splitAt(await captureRaw(fx.sim, '/v1/messages', { ...body, stream: true }, headers), 7),
    );
    expect(streamed.last.usage).toEqual({ input: 100, output: 6, cachedInput: 0, cacheWrite: 30, cacheWriteLong: 20 });
    // Without the breakdown of how long they are kept, writes are taken as kept the hour, the dearer.
    const bare = anthropic.readResponse('messages', {
      model: body.model,
      content: [],
      usage: { input_tokens: 10, cache_creation_input_tokens: 40, cache_read_input_tokens: 0, output_tokens: 2 },
    });
    expect(bare.usage).toEqual({ input: 50, output: 2, cachedInput: 0, cacheWrite: 0, cacheWriteLong: 40 });
  });

  it('counts the web searches an answer made, whole and streamed, by its usage or its search blocks', async () => {
    const headers = { 'x-sim-input-tokens': '40', 'x-sim-web-searches': '3' };
    const whole = anthropic.readResponse(
      'messages',
      JSON.parse(decodeText(await captureRaw(fx.sim, '/v1/messages', body, headers))),
    );
    expect(whole.usage).toEqual({ input: 40, output: 6, cachedInput: 0, hosted: { web_search: 3 } });
    expect(fx.sim.requests.at(-1)?.usageSent).toEqual(whole.usage);
    const streamed = await runMeter(
      anthropic.createStreamMeter('messages', body.model),
      splitAt(await captureRaw(fx.sim, '/v1/messages', { ...body, stream: true }, headers), 5),
    );
    expect(streamed.last.usage).toEqual(whole.usage);
    // Usage that leaves the searches out does not hide them: each search block is one.
    const search = (id: string) => ({ type: 'server_tool_use', id, name: 'web_search', input: { query: 'q' } });
    const blocks = anthropic.readResponse('messages', {
      model: body.model,
      content: [search('s1'), { type: 'text', text: 'x' }, search('s2')],
      usage: { input_tokens: 10, output_tokens: 2 },
    });
    expect(blocks.usage.hosted).toEqual({ web_search: 2 });
    const cut = anthropic.createStreamMeter('messages', body.model);
    const started = sse({ type: 'content_block_start', index: 1, content_block: { ...search('s9'), input: {} } });
    pushChunk(cut, new TextEncoder().encode(started));
    expect((await cut.end()).usage.hosted).toEqual({ web_search: 1 });
  });

  it('reads the tools Anthropic runs itself and remote MCP tools as tool calls', () => {
    const content = [
      { type: 'server_tool_use', id: 's1', name: 'web_search', input: { query: 'payroll' } },
      { type: 'web_search_tool_result', tool_use_id: 's1', content: [] },
      { type: 'mcp_tool_use', id: 'm1', name: 'delete_repo', server_name: 'github', input: { repo: 'a/b' } },
      { type: 'server_tool_use', id: 's2', input: {} },
      { type: 'text', text: 'Done.' },
    ];
    const reading = anthropic.readResponse('messages', { model: body.model, content }, 3);
    expect(reading.toolCalls).toEqual([
      { name: 'web_search', arguments: '{"query":"payroll"}' },
      { name: 'delete_repo', arguments: '{"repo":"a/b"}' },
      { name: 'server_tool_use', arguments: '{}' },
    ]);
    // Without usage, their input is generated text like a client tool's.
    expect(reading.usage.output).toBe(
      fx.tokens.countText(body.model, 'Done.web_search{"query":"payroll"}delete_repo{"repo":"a/b"}server_tool_use{}'),
    );
  });

  it('falls back to tiktoken on the content without usage', () => {
    const reading = anthropic.readResponse(
      'messages',
      { model: 'claude-sonnet-4', content: [{ type: 'text', text: ' one two' }] },
      9,
    );
    expect(reading).toMatchObject({ usage: { input: 9, output: 2, cachedInput: 0 }, usageSource: 'estimated' });
  });

  it('counts extended thinking in an answer without usage, as a stream does', () => {
    const content = [
      { type: 'thinking', thinking: ' weigh the options first', signature: 'c2lnbmF0dXJl' },
      { type: 'text', text: ' one two' },
    ];
    const reading = anthropic.readResponse('messages', { model: 'claude-sonnet-4', content }, 9);
    expect(reading.usage.output).toBe(fx.tokens.countText('claude-sonnet-4', ' one two weigh the options first'));
  });
});

describe('Anthropic stream meter', () => {
  it.each([
    ['text', {}],
    ['tool use', { 'x-sim-tool-call': 'search' }],
    ['cached', { 'x-sim-cached-tokens': '3' }],
  ])(
    '%s: the same usage split anywhere as unsplit, equal to what was sent',
    async (_name, headers: Record<string, string>) => {
      const raw = await captureRaw(fx.sim, '/v1/messages', { ...body, stream: true }, headers);
      const sent = fx.sim.requests.at(-1)?.usageSent;
      const whole = await runMeter(anthropic.createStreamMeter('messages', body.model), [raw]);
      expect(whole.last).toMatchObject({ usage: sent, usageSource: 'provider', done: true });
      expect(whole.last.toolCalls.map((c) => c.name)).toEqual(headers['x-sim-tool-call'] ? ['search'] : []);
      for (const call of whole.last.toolCalls)
        expect(call).toMatchObject({ complete: true, arguments: expect.stringMatching(/^\{.*\}$/) });
      for (const seed of [2, 3, 5, 8, 13]) {
        const split = await runMeter(anthropic.createStreamMeter('messages', body.model), splitAt(raw, seed));
        expect(split.last.usage).toEqual(whole.last.usage);
        expect(split.last.toolCalls).toEqual(whole.last.toolCalls);
        expect(decodeText(split.forwarded)).toBe(decodeText(raw));
      }
    },
  );

  it('holds a streamed server tool call open until its block stops', async () => {
    const raw = await captureRaw(
      fx.sim,
      '/v1/messages',
      { ...body, max_tokens: 4, stream: true },
      { 'x-sim-tool-call': 'web_fetch', 'x-sim-tool-kind': 'hosted' },
    );
    const meter = anthropic.createStreamMeter('messages', body.model, { estimatedInputTokens: 3 });
    const seen: boolean[] = [];
    // One progress object serves the whole stream: read each step as it comes.
    for (const step of meter.push(raw)) seen.push(...step.toolCalls.map((c) => c.complete));
    expect(seen.at(0)).toBe(false);
    expect(seen.at(-1)).toBe(true);
    expect((await meter.end()).toolCalls).toMatchObject([
      { name: 'web_fetch', arguments: expect.stringMatching(/^\{"input": ".+"\}$/) },
    ]);
  });

  it('takes input from message_start and estimates output until message_delta', async () => {
    const raw = await captureRaw(
      fx.sim,
      '/v1/messages',
      { ...body, max_tokens: 4, stream: true },
      { 'x-sim-input-tokens': '30' },
    );
    const events = decodeText(raw)
      .split('\n\n')
      .filter((e) => e.length > 0);
    const meter = anthropic.createStreamMeter('messages', body.model, { estimatedInputTokens: 99 });
    const untilDeltas = events.filter(
      (e) => !e.startsWith('event: message_delta') && !e.startsWith('event: message_stop'),
    );
    const p = pushChunk(meter, new TextEncoder().encode(untilDeltas.map((e) => e + '\n\n').join(''))).last!;
    // Until message_delta the output is bounded by the bytes of the text; counted exactly on demand.
    expect(p.usage.input).toBe(30);
    expect(p.usage.output).toBeGreaterThanOrEqual(4);
    expect(p.usageSource).toBe('estimated');
    expect((await meter.exact()).usage).toEqual({ input: 30, output: 4, cachedInput: 0 });
    expect(p.done).toBe(false);
  });
});

describe('Anthropic message batch results read back', () => {
  it("reads each succeeded request's tool calls, the provider's own included", () => {
    const line = (content: object[]) => ({
      custom_id: 'r',
      result: { type: 'succeeded', message: { role: 'assistant', content } },
    });
    const lines = [
      line([{ type: 'text', text: 'Done.' }]),
      line([{ type: 'tool_use', id: 't1', name: 'delete_repo', input: { repo: 'a/b' } }]),
      { custom_id: 'e', result: { type: 'errored', error: { type: 'invalid_request_error' } } },
      line([{ type: 'server_tool_use', id: 's1', name: 'web_search', input: { query: 'q' } }]),
    ];
    expect(anthropic.storedToolCalls?.('batch_results', lines)).toEqual([
      { name: 'delete_repo', arguments: '{"repo":"a/b"}' },
      { name: 'web_search', arguments: '{"query":"q"}' },
    ]);
    // Not a shape Anthropic serves: withheld rather than read as holding no call.
    expect(anthropic.storedToolCalls?.('response', {})).toBeUndefined();
  });
});

describe('Anthropic error formats', () => {
  it('answers in Anthropic format with the code in the message', () => {
    const reply = anthropic.errorResponse('SVC-BUD-3001', 'budget exhausted');
    expect(reply.status).toBe(422);
    expect(reply.headers['x-should-retry']).toBe('false');
    expect(JSON.parse(reply.body)).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'SVC-BUD-3001: budget exhausted', code: 'SVC-BUD-3001' },
    });
    expect(JSON.parse(anthropic.errorResponse('SVC-POL-2001', 'no').body)).toMatchObject({
      error: { type: 'permission_error' },
    });
  });

  it('ends a stream with event: error', () => {
    const text = decodeText(anthropic.streamErrorEvent('SVC-BUD-3001', 'budget exhausted'));
    expect(text).toMatch(/^event: error\ndata: /);
    expect(JSON.parse(text.split('data: ')[1] ?? '')).toMatchObject({
      type: 'error',
      error: { message: 'SVC-BUD-3001: budget exhausted' },
    });
  });
});

describe('Anthropic truncated stream', () => {
  it('reports a stream that closed before message_stop as not done, with estimated usage', async () => {
    const raw = await captureRaw(fx.sim, '/v1/messages', { ...body, max_tokens: 4, stream: true });
    const text = decodeText(raw);
    const cut = new TextEncoder().encode(text.slice(0, text.indexOf('event: message_delta')));
    const run = await runMeter(anthropic.createStreamMeter('messages', body.model), splitAt(cut, 6));
    expect(run.last.done).toBe(false);
    expect(run.last.usageSource).toBe('estimated');
    expect(run.last.usage.output).toBe(4);
  });
});

describe('Anthropic usage without a readable output count', () => {
  // Not a count: missing, negative, a string. The answer's text stands in, never zero or one.
  const unreadable = [undefined, -5, 'many'];

  it('meters the text of a whole answer', () => {
    for (const output of unreadable) {
      const reading = anthropic.readResponse(
        'messages',
        {
          model: 'claude-3-5-haiku-20241022',
          content: [{ type: 'text', text: ' one two three' }],
          usage: { input_tokens: 10, output_tokens: output },
        },
        42,
      );
      expect(reading.usage, String(output)).toMatchObject({ input: 10, output: 3 });
    }
  });

  it('meters the text of a stream whose message_delta has none, not the count message_start gave', async () => {
    for (const output of unreadable) {
      const raw = [
        sse({ type: 'message_start', message: { usage: { input_tokens: 10, output_tokens: 1 } } }, 'message_start'),
        sse(
          { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
          'content_block_start',
        ),
        sse(
          { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' one two three' } },
          'content_block_delta',
        ),
        sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
        sse(
          { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: output } },
          'message_delta',
        ),
        sse({ type: 'message_stop' }, 'message_stop'),
      ].join('');
      const meter = anthropic.createStreamMeter('messages', body.model, { estimatedInputTokens: 42 });
      const run = await runMeter(meter, [new TextEncoder().encode(raw)]);
      expect(run.last.usage, String(output)).toMatchObject({ input: 10, output: 3 });
    }
  });
});
