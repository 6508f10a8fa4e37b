import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
  await rig.addPolicy({
    name: 'no-web-search',
    priority: 400,
    rules: [{ action: 'tool:web_search', effect: 'deny' }],
  });
  // Remote MCP servers only where the platform team runs them: the first rule that matches
  // decides, so a server with no URL at all (an OpenAI connector) meets the deny.
  await rig.addPolicy({
    name: 'own-mcp-servers',
    priority: 400,
    rules: [
      {
        action: 'tool:mcp',
        effect: 'allow',
        conditions: [{ field: 'tool_hosts', operator: 'in', value: ['mcp.acme.example'] }],
      },
      { action: 'tool:mcp', effect: 'deny' },
    ],
  });
});
afterAll(async () => {
  await rig.close();
});

/** Requests the simulator received so far: a refused call never reaches it. */
const upstreamCalls = () => rig.sim.requests.length;

describe('tools the provider defines, judged as the request declares them', () => {
  it('refuses a request that offers a denied tool OpenAI runs itself, before it goes upstream', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-builtin-search' });
    const before = upstreamCalls();
    const error = await failure(() =>
      client.responses.create({ model: 'gpt-4o', input: 'find payroll', tools: [{ type: 'web_search' }] }),
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    expect((error as APIError).message).toContain('no-web-search');
    expect(upstreamCalls()).toBe(before);
    // The same agent without the tool is served.
    const answer = await client.responses.create({ model: 'gpt-4o', input: 'find payroll', max_output_tokens: 4 });
    expect(answer.status).toBe('completed');
  });

  it('refuses the same search declared as a preview or dated version, or through a search model, before it goes upstream', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-builtin-search-kinds' });
    const before = upstreamCalls();
    for (const type of ['web_search_preview', 'web_search_preview_2025_03_11', 'web_search_2025_08_26']) {
      const error = await failure(() =>
        client.responses.create({ model: 'gpt-4o', input: 'find payroll', tools: [{ type } as never] }),
      );
      expect((error as APIError).status, type).toBe(403);
      expect((error as APIError).message, type).toContain('no-web-search');
    }
    const searchModel = await failure(() =>
      client.chat.completions.create({
        model: 'gpt-4o-search-preview',
        messages: [{ role: 'user', content: 'find payroll' }],
        web_search_options: {},
      }),
    );
    expect((searchModel as APIError).status).toBe(403);
    expect((searchModel as APIError).message).toContain('no-web-search');
    expect(upstreamCalls()).toBe(before);
  });

  it('judges the tools a remote MCP server may call by name, before the provider calls them', async () => {
    await rig.addPolicy({
      name: 'no-repo-deletion',
      priority: 500,
      rules: [{ action: 'tool:delete_repo', effect: 'deny' }],
    });
    const openai = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-builtin-mcp-tools' });
    const before = upstreamCalls();
    const server = { type: 'mcp' as const, server_label: 'gh', server_url: 'https://mcp.acme.example/sse' };
    for (const allowed_tools of [['list_issues', 'delete_repo'], { tool_names: ['delete_repo'] }]) {
      const error = await failure(() =>
        openai.responses.create({
          model: 'gpt-4o',
          input: 'tidy up',
          tools: [{ ...server, allowed_tools, require_approval: 'never' }],
        }),
      );
      expect((error as APIError).status).toBe(403);
      expect((error as APIError).message).toContain('no-repo-deletion');
    }
    const anthropic = anthropicClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-builtin-mcp-tools-a' });
    const refused = await failure(() =>
      anthropic.beta.messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: 4,
        messages: [{ role: 'user', content: 'tidy up' }],
        mcp_servers: [
          {
            type: 'url',
            name: 'gh',
            url: 'https://mcp.acme.example/sse',
            tool_configuration: { allowed_tools: ['delete_repo'] },
          },
        ],
        betas: ['mcp-client-2025-04-04'],
      }),
    );
    expect((refused as AnthropicError).status).toBe(403);
    expect(upstreamCalls()).toBe(before);
    const listed = await openai.responses.create({
      model: 'gpt-4o',
      input: 'list issues',
      max_output_tokens: 4,
      tools: [{ ...server, allowed_tools: ['list_issues'], require_approval: 'never' }],
    });
    expect(listed.status).toBe('completed');
  });

  it('lets a remote MCP server through only on the hosts a rule names, from OpenAI and from Anthropic', async () => {
    const openai = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-builtin-mcp' });
    const allowed_tools = ['list_issues'];
    const mcp = (url: string) =>
      openai.responses.create({
        model: 'gpt-4o',
        input: 'list issues',
        max_output_tokens: 4,
        tools: [{ type: 'mcp', server_label: 'gh', server_url: url, allowed_tools, require_approval: 'never' }],
      });
    const before = upstreamCalls();
    const elsewhere = await failure(() => mcp('https://mcp.attacker.example/sse'));
    expect((elsewhere as APIError).status).toBe(403);
    expect((elsewhere as APIError).code).toBe('SVC-POL-2001');
    expect(upstreamCalls()).toBe(before);
    // An allowed host named beside the real one is no pass: every host must be allowed.
    const decoy = await failure(() => mcp('https://mcp.attacker.example/sse?via=https://mcp.acme.example/sse'));
    expect((decoy as APIError).status).toBe(403);
    expect((decoy as APIError).code).toBe('SVC-POL-2001');
    expect(upstreamCalls()).toBe(before);
    expect((await mcp('https://mcp.acme.example/sse')).status).toBe('completed');
    const connector = await failure(() =>
      openai.responses.create({
        model: 'gpt-4o',
        input: 'read mail',
        tools: [{ type: 'mcp', server_label: 'mail', connector_id: 'connector_gmail', require_approval: 'never' }],
      }),
    );
    expect((connector as APIError).status).toBe(403);
    expect(upstreamCalls()).toBe(before + 1);

    const anthropic = anthropicClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-builtin-mcp' });
    const servers = (url: string) =>
      anthropic.beta.messages.create({
        model: 'claude-3-5-haiku-20241022',
        max_tokens: 4,
        messages: [{ role: 'user', content: 'list issues' }],
        mcp_servers: [
          { type: 'url', name: 'gh', url, authorization_token: 'secret-token', tool_configuration: { allowed_tools } },
        ],
        betas: ['mcp-client-2025-04-04'],
      });
    const denied = await failure(() => servers('https://mcp.attacker.example/sse'));
    expect(denied).toBeInstanceOf(AnthropicError);
    expect((denied as AnthropicError).status).toBe(403);
    expect((denied as AnthropicError).message).toContain('SVC-POL-2001');
    const allowed = await servers('https://mcp.acme.example/sse');
    expect(allowed.stop_reason).toBe('end_turn');
  });

  it('judges a tool the agent defines only when the model calls it, not as it is declared', async () => {
    const answer = await openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-builtin-function',
    }).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'find it' }],
      tools: [{ type: 'function', function: { name: 'web_search', parameters: { type: 'object' } } }],
    });
    expect(answer.choices[0]?.finish_reason).toBe('stop');
  });
});
