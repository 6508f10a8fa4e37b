import { describe, expect, it } from 'vitest';
import type { SvcError } from '../../core/errors/index.ts';
import { decodeText, useAdapterFixture } from '../../test/simulator/adapter-fixture.ts';
import { captureRaw, pushChunk, runMeter, splitAt } from '../../test/simulator/index.ts';
import { createGeminiAdapter } from './gemini.ts';
import { IMAGE_TOKENS } from './non-text-input.ts';

const fx = useAdapterFixture();
const gemini = createGeminiAdapter(fx.deps);
const body = { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], generationConfig: { maxOutputTokens: 5 } };
const generatePath = '/v1beta/models/gemini-2.0-flash:generateContent';
const streamPath = '/v1beta/models/gemini-2.0-flash:streamGenerateContent';

describe('Gemini classify and parseRequest', () => {
  it('classifies by the method in the path', () => {
    expect(gemini.classify('POST', generatePath)).toBe('generate');
    expect(gemini.classify('POST', streamPath + '?alt=sse')).toBe('stream_generate');
    expect(gemini.classify('POST', '/v1beta/models/gemini-2.0-flash:countTokens')).toBeNull();
    expect(gemini.classify('GET', '/v1beta/models')).toBeNull();
  });

  it('takes the model from the path and declares functions and the tools Google runs', () => {
    const parsed = gemini.parseRequest(
      'stream_generate',
      {
        ...body,
        systemInstruction: { parts: [{ text: 'Be brief' }] },
        tools: [{ functionDeclarations: [{ name: 'lookup' }] }, { codeExecution: {} }, { google_search: {} }],
      },
      streamPath + '?alt=sse',
    );
    expect(parsed).toMatchObject({
      model: 'gemini-2.0-flash',
      stream: true,
      maxOutputTokens: 5,
      declaredTools: ['lookup', 'code_execution', 'google_search'],
      builtinTools: [
        { name: 'code_execution', arguments: '' },
        { name: 'google_search', arguments: '' },
      ],
    });
    expect(parsed.estimatedInputTokens).toBeGreaterThan(
      fx.tokens.countChatMessages('gemini-2.0-flash', [{ role: 'user', content: 'Hi' }]),
    );
  });

  it('judges every search Google runs as google_search too', () => {
    const parsed = gemini.parseRequest(
      'generate',
      { ...body, tools: [{ googleSearchRetrieval: {} }, { enterpriseWebSearch: {} }] },
      generatePath,
    );
    expect(parsed.builtinTools.map((t) => t.name)).toEqual([
      'google_search_retrieval',
      'google_search',
      'enterprise_web_search',
      'google_search',
    ]);
  });

  it("counts cached content, context on Google's side, at the configured allowance", () => {
    const parse = (extra: object) =>
      gemini.parseRequest('generate', { ...body, ...extra }, generatePath).estimatedInputTokens;
    const alone = parse({});
    expect(parse({ cachedContent: 'cachedContents/abc' })).toBe(alone + fx.deps.serverContextTokens);
    expect(parse({ cached_content: 'cachedContents/abc' })).toBe(alone + fx.deps.serverContextTokens);
  });

  it('holds files at the unknown-size allowance, images at the image bound, inline data at least at its bytes', () => {
    const unknown = fx.deps.serverContextTokens;
    const parse = (parts: unknown[]) =>
      gemini.parseRequest('generate', { ...body, contents: [{ role: 'user', parts }] }, generatePath)
        .estimatedInputTokens;
    const pdf = 'A'.repeat(1_000_000);
    const fileUri = 'https://generativelanguage.googleapis.com/v1beta/files/abc';
    expect(parse([{ fileData: { fileUri, mimeType: 'video/mp4' } }])).toBeGreaterThanOrEqual(unknown);
    expect(parse([{ file_data: { file_uri: fileUri, mime_type: 'application/pdf' } }])).toBeGreaterThanOrEqual(unknown);
    expect(parse([{ fileData: { fileUri, mimeType: 'image/png' } }])).toBeGreaterThanOrEqual(IMAGE_TOKENS.gemini);
    expect(parse([{ inlineData: { data: pdf, mimeType: 'application/pdf' } }])).toBeGreaterThanOrEqual(pdf.length);
    expect(parse([{ inlineData: { data: 'JVBER', mimeType: 'application/pdf' } }])).toBeGreaterThanOrEqual(unknown);
    expect(
      parse([{ functionResponse: { name: 'f', response: { r: 'ok' }, parts: [{ fileData: { fileUri } }] } }]),
    ).toBeGreaterThanOrEqual(unknown);
    expect(parse([{ functionResponse: { name: 'f', response: { rows: [{ a: 'x'.repeat(5000) }] } } }])).toBeLessThan(
      6000,
    );
    expect(parse([{ somePartOfTomorrow: { id: 'x' } }])).toBeGreaterThanOrEqual(unknown);
  });

  it('counts a function call or result once, as its text: name, arguments or response and other fields as JSON', () => {
    const parse = (parts: unknown[]) =>
      gemini.parseRequest('generate', { contents: [{ role: 'model', parts }] }, generatePath).estimatedInputTokens;
    const args = { city: 'Paris', days: [1, 2, 3] };
    const response = { forecast: 'sunny '.repeat(200) };
    const call = { id: 'c1', name: 'lookup', args };
    const result = { id: 'c1', name: 'lookup', response };
    const callText = 'lookup' + JSON.stringify(args) + JSON.stringify({ id: 'c1' });
    const resultText = 'lookup' + JSON.stringify(response) + JSON.stringify({ id: 'c1' });
    expect(parse([{ functionCall: call }])).toBe(parse([{ text: callText }]));
    expect(parse([{ function_call: call }])).toBe(parse([{ text: callText }]));
    expect(parse([{ functionResponse: result }])).toBe(parse([{ text: resultText }]));
    expect(parse([{ function_response: result }])).toBe(parse([{ text: resultText }]));
    // A part that gives both spellings counts both: Google could read either.
    expect(parse([{ functionCall: call, function_call: call }])).toBe(parse([{ text: callText + callText }]));
    // The parts of a result are measured as parts, not as its text: text among them at its bytes.
    const image = { inlineData: { mimeType: 'image/png', data: 'A'.repeat(100_000) } };
    const words = 'more rows '.repeat(500);
    expect(parse([{ functionResponse: { ...result, parts: [image, { text: words }] } }])).toBe(
      parse([{ text: resultText }]) + IMAGE_TOKENS.gemini + 'text'.length + words.length,
    );
  });

  it('reads snake_case fields and defaults the bound per model', () => {
    const parsed = gemini.parseRequest(
      'generate',
      { contents: [], generation_config: { max_output_tokens: 7, candidate_count: 2 } },
      generatePath,
    );
    expect(parsed.maxOutputTokens).toBe(14);
    expect(
      gemini.parseRequest('generate', { contents: [] }, '/v1beta/models/gemini-2.5-pro:generateContent')
        .maxOutputTokens,
    ).toBe(65536);
  });

  it('refuses a field given by both its names, which Google may read the other way', () => {
    const fieldsOf = (extra: object) => {
      try {
        gemini.parseRequest('generate', { contents: [], ...extra }, generatePath);
        return [];
      } catch (err) {
        expect((err as SvcError).code).toBe('SVC-SYS-9002');
        return (err as SvcError).fieldViolations.map((v) => v.field);
      }
    };
    expect(fieldsOf({ generationConfig: { maxOutputTokens: 1, max_output_tokens: 65536 } })).toEqual([
      'generationConfig.max_output_tokens',
    ]);
    expect(fieldsOf({ generationConfig: { candidateCount: 1, candidate_count: 8 } })).toEqual([
      'generationConfig.candidate_count',
    ]);
    expect(fieldsOf({ generationConfig: {}, generation_config: {} })).toEqual(['generation_config']);
    expect(fieldsOf({ cachedContent: 'cachedContents/a', cached_content: 'cachedContents/b' })).toEqual([
      'cached_content',
    ]);
    expect(
      fieldsOf({
        tools: [{ functionDeclarations: [{ name: 'read' }], function_declarations: [{ name: 'delete_everything' }] }],
      }),
    ).toEqual(['tools.0.function_declarations']);
    expect(fieldsOf({ generation_config: { max_output_tokens: 7 } })).toEqual([]);
  });

  it('rejects a body without contents and a path without a model', () => {
    try {
      gemini.parseRequest('generate', {}, generatePath);
      expect.unreachable();
    } catch (err) {
      expect((err as SvcError).fieldViolations.map((v) => v.field)).toEqual(['contents']);
    }
    expect(() => gemini.parseRequest('generate', body, '/v1beta/models')).toThrow(/path/);
  });
});

describe('Gemini parameters that shape the answer', () => {
  const named = (url: string, headers: Record<string, string> = {}) =>
    gemini.hidingParameter?.(new URL(url, 'https://generativelanguage.googleapis.com'), headers);

  it('names a field mask in the query, in any spelling, or in the header', () => {
    const generate = '/v1beta/models/gemini-2.5-pro:generateContent';
    expect(named(`${generate}?fields=candidates`)).toBe('fields');
    expect(named(`${generate}?%24fields=candidates`)).toBe('$fields');
    expect(named(`${generate}?alt=sse&Fields=candidates`)).toBe('Fields');
    expect(named(`${generate}?%66ields=candidates`)).toBe('fields');
    expect(named(generate, { 'x-goog-fieldmask': 'candidates' })).toBe('X-Goog-FieldMask');
  });

  it('names an answer format the proxy does not read, and JSONP', () => {
    const stream = '/v1beta/models/gemini-2.5-pro:streamGenerateContent';
    expect(named(`${stream}?alt=proto`)).toBe('alt=proto');
    expect(named(`${stream}?%24alt=media`)).toBe('$alt=media');
    expect(named(`${stream}?alt=sse&alt=proto`)).toBe('alt=proto');
    expect(named(`${stream}?callback=cb`)).toBe('callback');
    expect(named(`${stream}?%24Callback=cb`)).toBe('$Callback');
  });

  it('names nothing in a request without one', () => {
    expect(named('/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse')).toBeUndefined();
    expect(named('/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=json&key=k')).toBeUndefined();
    expect(named('/v1beta/models/gemini-2.5-pro:generateContent?fieldsx=1&my_fields=2')).toBeUndefined();
  });
});

describe('Gemini readResponse', () => {
  it('reads usage and function calls', async () => {
    const raw = await captureRaw(fx.sim, generatePath, body, {
      'x-sim-tool-call': 'lookup',
      'x-sim-cached-tokens': '2',
    });
    const reading = gemini.readResponse('generate', JSON.parse(decodeText(raw)));
    expect(reading).toEqual({
      usage: fx.sim.requests.at(-1)?.usageSent,
      usageSource: 'provider',
      toolCalls: [{ name: 'lookup', arguments: expect.stringMatching(/^\{.*\}$/) }],
      model: 'gemini-2.0-flash',
    });
    expect(reading.usage.cachedInput).toBe(2);
  });

  it('reads code the model runs with the code execution tool as a tool call, whole and streamed', async () => {
    const parts = [
      { text: 'Let me compute.' },
      { executableCode: { language: 'PYTHON', code: 'import os; os.remove("x")' } },
      { codeExecutionResult: { outcome: 'OUTCOME_OK', output: '' } },
    ];
    const answer = { candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP' }] };
    const reading = gemini.readResponse('generate', answer, 3);
    expect(reading.toolCalls).toEqual([{ name: 'code_execution', arguments: 'import os; os.remove("x")' }]);
    expect(reading.usage.output).toBe(
      fx.tokens.countText('gemini-2.0-flash', 'Let me compute.import os; os.remove("x")'),
    );
    const run = await runMeter(gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash'), [
      new TextEncoder().encode(`data: ${JSON.stringify(answer)}\n\n`),
    ]);
    expect(run.last.toolCalls).toEqual([
      { name: 'code_execution', arguments: 'import os; os.remove("x")', complete: true },
    ]);
  });

  it('bills a prompt grounded with Google Search once, whole and streamed, and reserves it when declared', async () => {
    const headers = { 'x-sim-web-searches': '2' };
    const whole = gemini.readResponse(
      'generate',
      JSON.parse(decodeText(await captureRaw(fx.sim, generatePath, body, headers))),
    );
    expect(whole.usage.hosted).toEqual({ google_search: 1 });
    expect(whole.usage).toEqual(fx.sim.requests.at(-1)?.usageSent);
    for (const path of [streamPath, `${streamPath}?alt=sse`]) {
      const raw = await captureRaw(fx.sim, path, body, headers);
      const run = await runMeter(gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash'), splitAt(raw, 3));
      expect(run.last.usage).toEqual(fx.sim.requests.at(-1)?.usageSent);
    }
    // Metadata that shows only a web source still shows a search.
    const sourced = { candidates: [{ groundingMetadata: { groundingChunks: [{ web: { uri: 'https://x' } }] } }] };
    expect(gemini.readResponse('generate', sourced, 3).usage.hosted).toEqual({ google_search: 1 });
    expect(
      gemini.readResponse('generate', { candidates: [{ groundingMetadata: {} }] }, 3).usage.hosted,
    ).toBeUndefined();
    for (const tools of [[{ googleSearch: {} }], [{ google_search_retrieval: {} }, { googleSearch: {} }]])
      expect(gemini.parseRequest('generate', { ...body, tools }, generatePath).hostedUses).toEqual({
        google_search: 1,
      });
    expect(
      gemini.parseRequest('generate', { ...body, tools: [{ codeExecution: {} }] }, generatePath).hostedUses,
    ).toBeUndefined();
  });

  it('counts thoughts as output', () => {
    const reading = gemini.readResponse('generate', {
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 4, thoughtsTokenCount: 6 },
    });
    expect(reading.usage).toEqual({ input: 10, output: 10, cachedInput: 0 });
  });
});

describe('Gemini stream meter', () => {
  it.each([
    ['JSON array', streamPath, {}],
    ['SSE', streamPath + '?alt=sse', {}],
    ['SSE tool call', streamPath + '?alt=sse', { 'x-sim-tool-call': 'lookup' }],
    ['JSON array tool call', streamPath, { 'x-sim-tool-call': 'lookup' }],
  ])(
    '%s: the same usage split anywhere as unsplit, equal to what was sent',
    async (_name, path, headers: Record<string, string>) => {
      const raw = await captureRaw(fx.sim, path, body, headers);
      const sent = fx.sim.requests.at(-1)?.usageSent;
      const whole = await runMeter(gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash'), [raw]);
      expect(whole.last).toMatchObject({ usage: sent, usageSource: 'provider', done: true });
      expect(whole.last.toolCalls.map((c) => c.name)).toEqual(headers['x-sim-tool-call'] ? ['lookup'] : []);
      for (const call of whole.last.toolCalls)
        expect(call).toMatchObject({ complete: true, arguments: expect.stringMatching(/^\{.*\}$/) });
      for (const seed of [4, 9, 16, 25, 36]) {
        const split = await runMeter(
          gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash'),
          splitAt(raw, seed),
        );
        expect(split.last.usage).toEqual(whole.last.usage);
        expect(split.last.toolCalls).toEqual(whole.last.toolCalls);
        expect(decodeText(split.forwarded)).toBe(decodeText(raw));
      }
    },
  );

  it('reads one JSON document answered to a stream request whole, releasing nothing before its tool calls are read', async () => {
    const raw = await captureRaw(fx.sim, generatePath, body, { 'x-sim-tool-call': 'lookup' });
    for (const seed of [1, 2, 3]) {
      const run = await runMeter(gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash'), splitAt(raw, seed));
      expect(
        run.progress.every((p) => p.forward.length === 0),
        `seed ${seed}`,
      ).toBe(true);
      expect(run.last.toolCalls.map((c) => c.name)).toEqual(['lookup']);
      expect(run.last).toMatchObject({ usageSource: 'provider' });
      expect(decodeText(run.forwarded)).toBe(decodeText(raw));
    }
  });

  it('reads a JSON-array stream behind a byte order mark, which the client skips, split anywhere', async () => {
    const raw = await captureRaw(fx.sim, streamPath, body, { 'x-sim-tool-call': 'lookup' });
    const marked = new Uint8Array([0xef, 0xbb, 0xbf, ...raw]);
    for (const seed of [1, 2, 3, 9]) {
      const run = await runMeter(
        gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash'),
        splitAt(marked, seed, 2),
      );
      expect(
        run.last.toolCalls.map((c) => c.name),
        `seed ${seed}`,
      ).toEqual(['lookup']);
      expect(run.last).toMatchObject({ usageSource: 'provider', done: true });
    }
  });

  it('cuts a JSON-array stream into a valid array ending in the error', async () => {
    const raw = await captureRaw(fx.sim, streamPath, body);
    const meter = gemini.createStreamMeter('stream_generate', 'gemini-2.0-flash');
    const first = decodeText(pushChunk(meter, raw.subarray(0, Math.floor(raw.length / 2))).forward);
    const parsed = JSON.parse(first + decodeText(meter.errorEvent('SVC-BUD-3001', 'budget exhausted'))) as unknown[];
    expect(parsed.at(-1)).toMatchObject({
      error: { code: 422, status: 'RESOURCE_EXHAUSTED', message: 'SVC-BUD-3001: budget exhausted' },
    });
    expect(parsed.length).toBeGreaterThan(1);
  });
});

describe('Gemini error formats', () => {
  it('answers in Google error format with the code as ErrorInfo reason', () => {
    const reply = gemini.errorResponse('SVC-POL-2001', 'denied');
    expect(reply.status).toBe(403);
    expect(JSON.parse(reply.body)).toEqual({
      error: {
        code: 403,
        message: 'SVC-POL-2001: denied',
        status: 'PERMISSION_DENIED',
        details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'SVC-POL-2001', domain: 'svc' }],
      },
    });
  });

  it('ends an SSE stream with a data error event', () => {
    const text = decodeText(gemini.streamErrorEvent('SVC-BUD-3001', 'x'));
    expect(text).toMatch(/^data: \{"error"/);
  });
});

describe('Gemini usage without a readable output count', () => {
  it('meters the text of a whole answer', () => {
    // Not a count: missing, negative, a string. The answer's text stands in, never zero.
    for (const candidates of [undefined, -3, 'many']) {
      const reading = gemini.readResponse(
        'generate',
        {
          modelVersion: 'gemini-2.0-flash',
          candidates: [{ content: { role: 'model', parts: [{ text: ' one two three' }] }, finishReason: 'STOP' }],
          usageMetadata: { promptTokenCount: 10, candidatesTokenCount: candidates },
        },
        42,
      );
      expect(reading.usage, String(candidates)).toMatchObject({ input: 10, output: 3 });
    }
  });
});
