import { z } from 'zod';
import { parseOrThrow, type SvcCode } from '../../core/errors/index.ts';
import type { HostedUses, TokenUsage } from '../../core/metering/prices.ts';
import type { ChatMessageText } from '../../core/metering/tokens.ts';
import {
  allowHostedUses,
  hostedUsesOf,
  resolveInput,
  unlistedOf,
  type AdapterDeps,
  type ParsedRequest,
  type ProviderAdapter,
  type ToolCall,
} from './adapter.ts';
import { codedMessage, errorReplies, type ErrorFormat } from './error-format.ts';
import { IMAGE_TOKENS, nonTextTokens } from './non-text-input.ts';
import { anthropicServerTools } from './anthropic-mcp-tools.ts';
import { asArray, asCount, asObject, asString, textOf, type JsonObject } from './json-access.ts';
import { ANTHROPIC_ROUTES, compileRoutes, meteredOperation, type StoredShape } from './routes.ts';
import { createStreamMeter, eventObject, type StreamDialect } from './stream-meter.ts';

export const AnthropicMessagesRequestSchema = z.looseObject({
  model: z.string().min(1),
  max_tokens: z.number().int().nonnegative(),
  messages: z.array(z.looseObject({ role: z.string(), content: z.unknown() })),
  system: z.union([z.string(), z.array(z.unknown())]).optional(),
  stream: z.boolean().optional(),
  // A client tool and a server tool have a name; an MCP toolset names its server instead.
  tools: z
    .array(
      z.looseObject({
        name: z.string().optional(),
        type: z.string().optional(),
        max_uses: z.number().int().nonnegative().optional(),
      }),
    )
    .optional(),
  mcp_servers: z.array(z.looseObject({ name: z.string().optional(), url: z.string().optional() })).optional(),
});

const MCP = 'mcp';
/** The type of Anthropic's web search tool, before its version date (`web_search_20250305`). */
const WEB_SEARCH = 'web_search_';

/** A custom tool the agent defines has no type, or `custom`; an MCP toolset is its server's. */
const NOT_BUILTIN: ReadonlySet<unknown> = new Set([undefined, 'custom', 'mcp_toolset']);

/**
 * The tools a request declares: each by its name (an MCP toolset as `mcp`), and `mcp` for each
 * remote MCP server it hands Anthropic to call, as OpenAI's `mcp` tool is declared. Built in:
 * every typed tool Anthropic defines (web search, code execution, bash, the computer), and each
 * MCP server with where it is (its URL gives a rule `tool_hosts`), never its credentials.
 */
function toolsOf(
  req: z.infer<typeof AnthropicMessagesRequestSchema>,
): Pick<ParsedRequest, 'declaredTools' | 'builtinTools' | 'hostedUses' | 'unlistedMcpServers'> {
  const declaredTools: string[] = [];
  const builtinTools: ToolCall[] = [];
  const hostedUses: HostedUses = {};
  const unlistedMcpServers: string[] = [];
  for (const t of req.tools ?? []) {
    const name = t.name ?? (t.type === 'mcp_toolset' ? MCP : (t.type ?? 'unknown'));
    declaredTools.push(name);
    if (!NOT_BUILTIN.has(t.type)) builtinTools.push({ name, arguments: '' });
    // Web search bills per search, up to the tool's `max_uses`.
    if (t.type?.startsWith(WEB_SEARCH) === true) allowHostedUses(hostedUses, 'web_search', t.max_uses);
  }
  for (const [i, server] of (req.mcp_servers ?? []).entries()) {
    if (!declaredTools.includes(MCP)) declaredTools.push(MCP);
    const { name, url, tool_configuration } = server;
    const args = JSON.stringify({ name, url, tool_configuration });
    builtinTools.push({ name: MCP, arguments: args });
    const allowed = anthropicServerTools(server, i, req.tools ?? []);
    if ('unlisted' in allowed) {
      unlistedMcpServers.push(allowed.unlisted);
      continue;
    }
    for (const tool of allowed.tools) {
      declaredTools.push(tool);
      builtinTools.push({ name: tool, arguments: args });
    }
  }
  return { declaredTools, builtinTools, ...hostedUsesOf(hostedUses), ...unlistedOf(unlistedMcpServers) };
}

const TOOL_USE_BLOCKS: ReadonlySet<unknown> = new Set(['tool_use', 'server_tool_use', 'mcp_tool_use']);

/**
 * The tool a content block calls: one the client runs (`tool_use`), one Anthropic runs itself
 * (`server_tool_use`: web search and fetch, code execution) or a remote MCP server's tool
 * (`mcp_tool_use`). All three are judged alike, by the tool's name.
 */
function toolUseName(block: JsonObject | undefined): string | undefined {
  if (block === undefined || !TOOL_USE_BLOCKS.has(block.type)) return undefined;
  return asString(block.name) || String(block.type);
}

/** A search Anthropic's web search tool makes, billed per search whatever its usage says. */
function isWebSearch(block: JsonObject | undefined): boolean {
  return block?.type === 'server_tool_use' && block.name === 'web_search';
}

/** The answer's hosted-tool uses: the searches its usage reports, or its search blocks if more. */
function hostedOf(content: readonly unknown[], usage: Partial<TokenUsage> | undefined): Pick<TokenUsage, 'hosted'> {
  const searches = Math.max(usage?.hosted?.web_search ?? 0, content.filter((b) => isWebSearch(asObject(b))).length);
  return searches > 0 ? { hosted: { web_search: searches } } : {};
}

function blocksText(content: unknown): string {
  let out = textOf(content);
  for (const block of asArray(content)) {
    const b = asObject(block);
    const tool = toolUseName(b);
    if (tool !== undefined) out += tool + JSON.stringify(b?.input ?? {});
    // Extended thinking counts as its text, as in a stream: an answer's is billed as output, and
    // in a prompt it can only raise the estimate.
    else if (b?.type === 'thinking') out += asString(b.thinking) ?? '';
  }
  return out;
}

/**
 * Anthropic's `input_tokens` excludes cache reads and writes; the canonical input includes both.
 * Writes are billed by how long they are kept (`cache_creation`: five minutes or an hour); without
 * that breakdown they are taken as kept the hour, the dearer.
 */
function anthropicUsage(usage: JsonObject | undefined): Partial<TokenUsage> | undefined {
  if (!usage) return undefined;
  const input = asCount(usage.input_tokens);
  const cacheWrite = asCount(usage.cache_creation_input_tokens) ?? 0;
  const cacheRead = asCount(usage.cache_read_input_tokens) ?? 0;
  const kept = asObject(usage.cache_creation);
  const short = asCount(kept?.ephemeral_5m_input_tokens);
  const result: Partial<TokenUsage> = {};
  if (input !== undefined) {
    result.input = input + cacheWrite + cacheRead;
    result.cachedInput = cacheRead;
    if (cacheWrite > 0) {
      result.cacheWrite = Math.min(short ?? 0, cacheWrite);
      result.cacheWriteLong = cacheWrite - result.cacheWrite;
    }
  }
  const output = asCount(usage.output_tokens);
  if (output !== undefined) result.output = output;
  const searches = asCount(asObject(usage.server_tool_use)?.web_search_requests);
  if (searches !== undefined && searches > 0) result.hosted = { web_search: searches };
  return result;
}

function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** The SDK raises `event: error` as an APIError whose message is `error.message`. */
const ANTHROPIC_ERRORS: ErrorFormat = {
  streamEventName: 'error',
  payload: (svcCode: SvcCode, message: string, status: number) => ({
    type: 'error',
    error: { type: anthropicErrorType(status), message: codedMessage(svcCode, message), code: svcCode },
  }),
};

const ROUTES = compileRoutes(ANTHROPIC_ROUTES);

const messagesStreamDialect: StreamDialect = {
  framing: 'sse',
  errorFormat: ANTHROPIC_ERRORS,
  onEvent(event, acc) {
    const json = eventObject(event, acc);
    if (!json) return true;
    switch (asString(json.type) ?? event.event) {
      case 'message_start': {
        const usage = anthropicUsage(asObject(asObject(json.message)?.usage));
        if (usage) acc.reportUsage(usage, false);
        break;
      }
      case 'content_block_start': {
        const block = asObject(json.content_block);
        const name = toolUseName(block);
        const input = asObject(block?.input);
        const given = input !== undefined && Object.keys(input).length > 0 ? JSON.stringify(input) : '';
        if (name) acc.toolStart(String(asCount(json.index) ?? 0), name, given);
        if (isWebSearch(block)) acc.hostedUse('web_search', asString(block?.id) ?? String(asCount(json.index) ?? 0));
        break;
      }
      case 'content_block_delta': {
        const delta = asObject(json.delta);
        const text = asString(delta?.text) ?? asString(delta?.partial_json) ?? asString(delta?.thinking);
        if (text) acc.text(text);
        const partial = asString(delta?.partial_json);
        if (partial) acc.toolArgs(String(asCount(json.index) ?? 0), partial);
        break;
      }
      case 'content_block_stop':
        // The block's arguments are whole: the call is judged before this event is forwarded.
        acc.toolEnd(String(asCount(json.index) ?? 0));
        break;
      case 'message_delta': {
        // Cumulative totals of the whole answer.
        const usage = anthropicUsage(asObject(json.usage));
        if (usage) acc.reportUsage(usage, true);
        break;
      }
      case 'message_stop':
      case 'error':
        acc.finish();
        break;
    }
    return true;
  },
};

/**
 * The tool calls of a message batch's results read back: each line's message, when its request
 * succeeded, holds them as an answer does.
 */
function batchToolCalls(shape: StoredShape, lines: unknown): ToolCall[] | undefined {
  if (shape !== 'batch_results') return undefined;
  return asArray(lines).flatMap((line) => {
    const message = asObject(asObject(asObject(line)?.result)?.message);
    return messageToolCalls(asArray(message?.content));
  });
}

/**
 * How long the request asks Anthropic to keep what it caches: the longest `cache_control` of the
 * request, its system blocks, tools, message blocks and the blocks of their tool results. An hour
 * (`ttl: "1h"`) or any time it does not know is the long time, the dearer to write.
 */
function promptCaching(req: z.infer<typeof AnthropicMessagesRequestSchema>): Pick<ParsedRequest, 'promptCaching'> {
  let kept: 'short' | 'long' | undefined;
  const mark = (value: unknown) => {
    const control = asObject(value);
    if (control === undefined || kept === 'long') return;
    kept = control.ttl === undefined || control.ttl === '5m' ? 'short' : 'long';
  };
  const blocks = (content: unknown) => {
    for (const block of asArray(content)) {
      const b = asObject(block);
      mark(b?.cache_control);
      if (b?.type === 'tool_result') for (const inner of asArray(b.content)) mark(asObject(inner)?.cache_control);
    }
  };
  mark(asObject(req)?.cache_control);
  blocks(req.system);
  blocks(req.tools);
  for (const m of req.messages) blocks(m.content);
  return kept === undefined ? {} : { promptCaching: kept };
}

/** The tool calls of an answer's content blocks, with their input as JSON. */
function messageToolCalls(content: readonly unknown[]): ToolCall[] {
  const toolCalls: ToolCall[] = [];
  for (const block of content) {
    const b = asObject(block);
    const name = toolUseName(b);
    if (name !== undefined) toolCalls.push({ name, arguments: JSON.stringify(b?.input ?? {}) });
  }
  return toolCalls;
}

export function createAnthropicAdapter(deps: AdapterDeps): ProviderAdapter {
  return {
    id: 'anthropic',
    hosts: ['api.anthropic.com'],
    reversePrefix: '/anthropic',
    route: (method, path) => ROUTES.match(method, path),
    classify: (method, path) => meteredOperation(ROUTES.match(method, path)),
    parseRequest(_op, body) {
      const req = parseOrThrow(AnthropicMessagesRequestSchema, body);
      const messages: ChatMessageText[] = req.messages.map((m) => ({ role: m.role, content: blocksText(m.content) }));
      if (req.system !== undefined) messages.unshift({ role: 'system', content: textOf(req.system) });
      const tools = req.tools && req.tools.length > 0 ? deps.tokens.countText(req.model, JSON.stringify(req.tools)) : 0;
      const amounts = { image: IMAGE_TOKENS.anthropic, unknown: deps.serverContextTokens };
      let nonText = nonTextTokens(req.system, amounts);
      for (const m of req.messages) nonText += nonTextTokens(m.content, amounts);
      return {
        model: req.model,
        stream: req.stream === true,
        estimatedInputTokens: deps.tokens.countChatMessages(req.model, messages) + tools + nonText,
        maxOutputTokens: req.max_tokens,
        ...toolsOf(req),
        ...promptCaching(req),
      };
    },
    prepareRequest(_op, body) {
      return { body, modified: false, hideStreamUsage: false };
    },
    readResponse(_op, body, estimatedInputTokens) {
      const json = asObject(body) ?? {};
      const model = asString(json.model) ?? '';
      const toolCalls = messageToolCalls(asArray(json.content));
      const usage = anthropicUsage(asObject(json.usage));
      const hosted = hostedOf(asArray(json.content), usage);
      if (usage?.input !== undefined) {
        return {
          usage: {
            input: usage.input,
            output: usage.output ?? deps.tokens.countText(model, blocksText(json.content)),
            cachedInput: usage.cachedInput ?? 0,
            ...(usage.cacheWrite === undefined
              ? {}
              : { cacheWrite: usage.cacheWrite, cacheWriteLong: usage.cacheWriteLong ?? 0 }),
            ...hosted,
          },
          usageSource: 'provider',
          toolCalls,
          model,
        };
      }
      return {
        usage: {
          input: resolveInput(estimatedInputTokens),
          output: deps.tokens.countText(model, blocksText(json.content)),
          cachedInput: 0,
          ...hosted,
        },
        usageSource: 'estimated',
        toolCalls,
        model,
      };
    },
    storedToolCalls: batchToolCalls,
    createStreamMeter(_op, model, options = {}) {
      return createStreamMeter(messagesStreamDialect, {
        model,
        tokens: deps.tokens,
        estimatedInputTokens: options.estimatedInputTokens ?? 0,
        maxEventBytes: deps.maxEventBytes,
        maxToolArgsChars: deps.maxToolArgsChars,
      });
    },
    ...errorReplies(ANTHROPIC_ERRORS),
  };
}
