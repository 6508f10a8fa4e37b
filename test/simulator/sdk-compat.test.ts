import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { AzureOpenAI } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from './index.ts';

// The official SDKs pointed at the simulator: they must parse its JSON and streams, and raise the
// proxy's refusal formats as errors carrying the SVC code, without retrying terminal ones.
let sim: Simulator;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  sim = await startSimulator();
  openai = new OpenAI({ apiKey: 'sk-test', baseURL: `${sim.url}/v1` });
  anthropic = new Anthropic({ apiKey: 'sk-ant-test', baseURL: sim.url });
});
afterAll(() => sim.close());
beforeEach(() => {
  sim.requests.length = 0;
});

async function rejection(promise: Promise<unknown>): Promise<Error & { status?: number }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { status?: number };
  }
  throw new Error('expected a rejection');
}

describe('openai SDK', () => {
  it('parses a chat completion with usage', async () => {
    const res = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
    });
    expect(res.choices[0]?.message.content).toBe(' one two three');
    expect(res.usage?.completion_tokens).toBe(3);
    expect(res.usage?.prompt_tokens).toBe(sim.requests[0]?.usageSent?.input);
  });

  it('streams chat with include_usage', async () => {
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let completionTokens: number | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
    }
    expect(text).toBe(' one two three four');
    expect(completionTokens).toBe(4);
  });

  it('parses streamed and plain tool calls', async () => {
    const plain = await openai.chat.completions.create(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'weather?' }], max_tokens: 2 },
      { headers: { 'x-sim-tool-call': 'get_weather' } },
    );
    expect(plain.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      type: 'function',
      function: { name: 'get_weather' },
    });
    const runner = openai.chat.completions.stream(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'weather?' }], max_tokens: 3 },
      { headers: { 'x-sim-tool-call': 'get_weather' } },
    );
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === 'function' ? call.function.name : undefined).toBe('get_weather');
    expect(JSON.parse(call?.type === 'function' ? call.function.arguments : '{}')).toEqual({ input: 'one two three' });
  });

  it('streams a Responses answer', async () => {
    const stream = await openai.responses.create({ model: 'gpt-4.1', input: 'hi', max_output_tokens: 3, stream: true });
    let text = '';
    let outputTokens: number | undefined;
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') outputTokens = event.response.usage?.output_tokens;
    }
    expect(text).toBe(' one two three');
    expect(outputTokens).toBe(3);
  });

  it('decodes embeddings', async () => {
    const res = await openai.embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] });
    expect(res.data).toHaveLength(2);
    expect(res.data[0]?.embedding).toHaveLength(8);
    expect(res.usage.prompt_tokens).toBe(sim.requests[0]?.usageSent?.input);
  });

  it.each([
    ['SVC-POL-2001', 403, OpenAI.PermissionDeniedError],
    ['SVC-BUD-3001', 422, OpenAI.UnprocessableEntityError],
  ] as const)('raises %s (%i) once, without retrying', async (code, status, type) => {
    const err = await rejection(
      openai.chat.completions.create(
        { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] },
        { headers: { 'x-sim-error-code': code } },
      ),
    );
    expect(err).toBeInstanceOf(type);
    expect(err.status).toBe(status);
    expect(err.message).toContain(code);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe(code);
    expect(sim.requests).toHaveLength(1);
  });

  it('still retries a recoverable error', async () => {
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${sim.url}/v1`, maxRetries: 1 });
    const err = await rejection(
      client.chat.completions.create(
        { model: 'gpt-4o', messages: [] },
        { headers: { 'x-sim-error-code': 'SVC-SYS-9001' } },
      ),
    );
    expect(err.message).toContain('SVC-SYS-9001');
    expect(sim.requests).toHaveLength(2);
  });

  it('raises a mid-stream error event with the code', async () => {
    const stream = await openai.chat.completions.create(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream: true },
      { headers: { 'x-sim-error-code': 'SVC-BUD-3001', 'x-sim-stream-error-after': '3' } },
    );
    let text = '';
    const err = await rejection(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })(),
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.message).toContain('SVC-BUD-3001');
    expect(text).toBe(' one two');
  });

  it('raises a mid-stream error in a Responses stream', async () => {
    const stream = await openai.responses.create(
      { model: 'gpt-4.1', input: 'hi', max_output_tokens: 5, stream: true },
      { headers: { 'x-sim-error-code': 'SVC-BUD-3001', 'x-sim-stream-error-after': '3' } },
    );
    const err = await rejection(
      (async () => {
        for await (const _event of stream) {
          // drain
        }
      })(),
    );
    expect(err.message).toContain('SVC-BUD-3001');
  });

  it('reaches Azure deployment paths', async () => {
    const azure = new AzureOpenAI({
      apiKey: 'k',
      endpoint: sim.url,
      apiVersion: '2024-10-21',
      deployment: 'gpt-4o-prod',
    });
    const res = await azure.chat.completions.create({
      model: 'gpt-4o-prod',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    expect(res.choices[0]?.message.content).toBe(' one two');
    expect(sim.requests[0]?.path).toMatch(
      /^\/openai\/deployments\/gpt-4o-prod\/chat\/completions\?api-version=2024-10-21/,
    );
    expect(sim.requests[0]?.provider).toBe('azure-openai');
  });
});

describe('anthropic SDK', () => {
  it('parses a message with usage and tool use', async () => {
    const msg = await anthropic.messages.create(
      { model: 'claude-sonnet-4-20250514', max_tokens: 3, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-sim-cached-tokens': '2' } },
    );
    expect(msg.content[0]).toEqual({ type: 'text', text: ' one two three' });
    expect(msg.usage).toMatchObject({ output_tokens: 3, cache_read_input_tokens: 2 });
    const tool = await anthropic.messages.create(
      { model: 'claude-sonnet-4', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-sim-tool-call': 'search' } },
    );
    expect(tool.content[0]).toMatchObject({ type: 'tool_use', name: 'search' });
  });

  it('streams events and assembles the final message', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-3-5-haiku-20241022',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'text', text: ' one two three four' });
    expect(final.usage.output_tokens).toBe(4);
    expect(final.usage.input_tokens).toBe(sim.requests[0]?.usageSent?.input);
  });

  it('assembles a streamed tool call', async () => {
    const stream = anthropic.messages.stream(
      { model: 'claude-sonnet-4', max_tokens: 3, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-sim-tool-call': 'search' } },
    );
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'tool_use', name: 'search', input: { input: 'one two three' } });
  });

  it.each([
    ['SVC-POL-2001', 403, Anthropic.PermissionDeniedError],
    ['SVC-BUD-3001', 422, Anthropic.UnprocessableEntityError],
  ] as const)('raises %s (%i) once, without retrying', async (code, status, type) => {
    const err = await rejection(
      anthropic.messages.create(
        { model: 'claude-sonnet-4', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
        { headers: { 'x-sim-error-code': code } },
      ),
    );
    expect(err).toBeInstanceOf(type);
    expect(err.status).toBe(status);
    expect(err.message).toContain(code);
    expect(sim.requests).toHaveLength(1);
  });

  it('raises a mid-stream error event with the code', async () => {
    const stream = await anthropic.messages.create(
      { model: 'claude-sonnet-4', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }], stream: true },
      { headers: { 'x-sim-error-code': 'SVC-BUD-3001', 'x-sim-stream-error-after': '2' } },
    );
    let text = '';
    const err = await rejection(
      (async () => {
        for await (const event of stream)
          if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      })(),
    );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.message).toContain('SVC-BUD-3001');
    expect(text).toBe(' one two');
  });
});
