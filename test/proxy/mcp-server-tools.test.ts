import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import type {
  BetaMCPToolset,
  BetaRequestMCPServerURLDefinition,
} from '@anthropic-ai/sdk/resources/beta/messages/messages';
import { APIError } from 'openai';
import type { Tool } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyViolationMessage } from '../../core/events/messages.ts';
import { eventually } from '../harness/control-plane.ts';
import { failure } from '../harness/failure.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

let rig: ProxyRig;
const HOST = 'mcp.acme.example';
const URL = `https://${HOST}/sse`;

beforeAll(async () => {
  rig = await startProxyRig();
  // Rules that judge a server's host and a model, none a tool by its name.
  await rig.addPolicy({
    name: 'servers-and-models',
    priority: 400,
    rules: [
      { action: 'tool:mcp', effect: 'deny', conditions: [{ field: 'tool_hosts', operator: 'not_in', value: [HOST] }] },
      { action: 'llm:gpt-3.5*', effect: 'deny' },
    ],
  });
});
afterAll(async () => {
  await rig.close();
});

const upstreamCalls = () => rig.sim.requests.length;
const FUNCTION: Tool = { type: 'function', name: 'lookup', parameters: { type: 'object' }, strict: false };

function openAiServer(fields: Record<string, unknown>): Tool {
  return { type: 'mcp', server_label: 'gh', server_url: URL, ...fields };
}

function anthropicServer(fields: Record<string, unknown>): BetaRequestMCPServerURLDefinition {
  return { type: 'url', name: 'gh', url: URL, ...fields };
}

function responses(execution: string, server: Tool) {
  return openAiClient(rig.agent, { 'X-Svc-Execution-Id': execution }).responses.create({
    model: 'gpt-4o',
    input: 'tidy up',
    max_output_tokens: 4,
    tools: [FUNCTION, server],
  });
}

function messages(execution: string, server: BetaRequestMCPServerURLDefinition) {
  return anthropicClient(rig.agent, { 'X-Svc-Execution-Id': execution }).beta.messages.create({
    model: 'claude-3-5-haiku-20241022',
    max_tokens: 4,
    messages: [{ role: 'user', content: 'tidy up' }],
    mcp_servers: [server],
    betas: ['mcp-client-2025-04-04'],
  });
}

/** The current form: the server's tools chosen by an `mcp_toolset` tool. */
function toolsetMessages(execution: string, toolset: Omit<BetaMCPToolset, 'type' | 'mcp_server_name'>) {
  return anthropicClient(rig.agent, { 'X-Svc-Execution-Id': execution }).beta.messages.create({
    model: 'claude-3-5-haiku-20241022',
    max_tokens: 4,
    messages: [{ role: 'user', content: 'tidy up' }],
    mcp_servers: [anthropicServer({})],
    tools: [{ type: 'mcp_toolset', mcp_server_name: 'gh', ...toolset }],
    betas: ['mcp-client-2025-11-20'],
  });
}

/** Declarations that let the server call any of its tools, and the field each is refused by. */
const UNLISTED_OPENAI: [Record<string, unknown>, string][] = [
  [{ require_approval: 'never' }, 'tools[1].allowed_tools'],
  [{}, 'tools[1].allowed_tools'],
  [{ allowed_tools: { read_only: true } }, 'tools[1].allowed_tools'],
  [{ allowed_tools: { tool_names: ['list_issues'], only: 'x' } }, 'tools[1].allowed_tools'],
  [{ allowed_tools: ['list_issues', 7] }, 'tools[1].allowed_tools'],
  [{ allowed_tools: 'list_issues' }, 'tools[1].allowed_tools'],
  [{ require_approval: { always: { tool_names: ['delete_repo'] } } }, 'tools[1].allowed_tools'],
  [{ require_approval: { always: {}, never: { tool_names: ['list_issues'] } } }, 'tools[1].allowed_tools'],
  [{ require_approval: { always: { read_only: true } } }, 'tools[1].allowed_tools'],
  [
    { allowed_tools: { read_only: false }, require_approval: { always: { read_only: true } } },
    'tools[1].allowed_tools',
  ],
  [{ require_approval: { always: {}, sometimes: {} } }, 'tools[1].allowed_tools'],
  [
    { allowed_tools: { read_only: true, tool_names: 'x' }, require_approval: { always: { read_only: true } } },
    'tools[1].allowed_tools',
  ],
  [{ require_approval: { always: { tool_names: null } } }, 'tools[1].allowed_tools'],
  [{ require_approval: { never: {} } }, 'tools[1].allowed_tools'],
];

describe('a remote MCP server handed to the provider', () => {
  it('may call any of its tools while no rule judges tools by name; once one does, it must list them', async () => {
    for (const [fields] of UNLISTED_OPENAI) {
      const answer = await responses('exec-mcp-unlisted', openAiServer(fields));
      expect(answer.status, JSON.stringify(fields)).toBe('completed');
    }
    expect((await messages('exec-mcp-unlisted-a', anthropicServer({}))).stop_reason).toBe('end_turn');

    await rig.addPolicy({
      name: 'no-repo-deletion',
      priority: 500,
      rules: [{ action: 'tool:delete_*', effect: 'deny' }],
    });
    const before = upstreamCalls();
    for (const [fields, field] of UNLISTED_OPENAI) {
      const error = await failure(() => responses('exec-mcp-refused', openAiServer(fields)));
      expect(error, JSON.stringify(fields)).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(403);
      expect((error as APIError).code).toBe('SVC-ADP-5003');
      expect((error as APIError).message).toContain(field);
    }
    for (const tool_configuration of [undefined, { enabled: true }, { allowed_tools: [{ name: 'x' }] }]) {
      const error = await failure(() =>
        messages('exec-mcp-refused-a', anthropicServer(tool_configuration ? { tool_configuration } : {})),
      );
      expect(error, JSON.stringify(tool_configuration)).toBeInstanceOf(AnthropicError);
      expect((error as AnthropicError).status).toBe(403);
      expect((error as AnthropicError).message).toContain('SVC-ADP-5003');
      expect((error as AnthropicError).message).toContain('mcp_servers[0].tool_configuration.allowed_tools');
    }
    const toolset = await failure(() =>
      toolsetMessages('exec-mcp-refused-a', { configs: { delete_repo: { enabled: false } } }),
    );
    expect((toolset as AnthropicError).status).toBe(403);
    expect((toolset as AnthropicError).message).toContain('SVC-ADP-5003');
    expect((toolset as AnthropicError).message).toContain('tools[0].default_config.enabled');
    expect(upstreamCalls()).toBe(before);
    // Each refusal is a policy denial: its violation is published, naming the field.
    const refusals = UNLISTED_OPENAI.length + 3 + 1;
    const violations = await eventually(
      () =>
        rig.cp.published
          .filter((m) => m.subject === 'svc.acme.policies.violation')
          .map((m) => m.data as PolicyViolationMessage),
      (list) => list.length >= refusals,
    );
    expect(violations).toHaveLength(refusals);
    for (const violation of violations) {
      expect(violation).toMatchObject({
        // No policy decided it: named by no policy id, as the control plane's own denials are.
        policy_id: '',
        rule_id: null,
        denied_action: 'tool:mcp',
        decision: 'DENY',
        source: expect.stringMatching(/^proxy:/),
      });
      expect(violation.message).toMatch(/^(tools|mcp_servers)\[\d\]\.[a-z_.]+: a remote MCP server/);
    }
  });

  it('passes with a list, when every call it may make asks for approval in the answer, or with its tools turned off', async () => {
    await rig.addPolicy({
      name: 'no-shell',
      priority: 500,
      rules: [{ action: 'tool:shell', effect: 'deny' }],
    });
    const passing = [
      { allowed_tools: ['list_issues'], require_approval: 'never' },
      { allowed_tools: { tool_names: ['list_issues'], read_only: true } },
      { allowed_tools: ['list_issues'], require_approval: { never: { tool_names: ['list_issues'] } } },
      { require_approval: 'always' },
      // Approval asked of every tool the server may call: none excepted, or the same read-only ones.
      { require_approval: { always: {} } },
      { allowed_tools: { read_only: true }, require_approval: { always: { read_only: true } } },
    ];
    for (const fields of passing) {
      const answer = await responses('exec-mcp-listed', openAiServer(fields));
      expect(answer.status, JSON.stringify(fields)).toBe('completed');
    }
    for (const tool_configuration of [{ allowed_tools: ['list_issues'] }, { enabled: false }]) {
      const answer = await messages('exec-mcp-listed-a', anthropicServer({ tool_configuration }));
      expect(answer.stop_reason, JSON.stringify(tool_configuration)).toBe('end_turn');
    }
    const toolset = await toolsetMessages('exec-mcp-listed-a', {
      default_config: { enabled: false },
      configs: { list_issues: { enabled: true } },
    });
    expect(toolset.stop_reason).toBe('end_turn');
    // The tools a toolset lets its server call are judged by name.
    const shell = await failure(() =>
      toolsetMessages('exec-mcp-listed-a', {
        default_config: { enabled: false },
        configs: { shell: { enabled: true } },
      }),
    );
    expect((shell as AnthropicError).message).toContain('SVC-POL-2001');
  });
});
