import { z } from 'zod';
import { parseOrThrow, SvcError } from '../../core/errors/index.ts';
import type { ChatMessageText } from '../../core/metering/tokens.ts';
import type { HostedTool, HostedUses } from '../../core/metering/prices.ts';
import {
  allowHostedUses,
  hostedUsesOf,
  unlistedOf,
  type AdapterDeps,
  type Operation,
  type ParsedRequest,
  type ToolCall,
} from './adapter.ts';
import { textOf } from './json-access.ts';
import { mcpAllowedTools } from './mcp-allowed-tools.ts';
import { approvesEveryCall } from './mcp-approval.ts';
import { IMAGE_TOKENS, nonTextTokens, type NonTextAmounts } from './non-text-input.ts';

const count = z.number().int().nonnegative();

/** A function tool (chat: `function.name`; Responses: `name`) or a custom one (chat: `custom.name`). */
const ChatToolSchema = z.looseObject({
  type: z.string().optional(),
  function: z.looseObject({ name: z.string() }).optional(),
  custom: z.looseObject({ name: z.string() }).optional(),
  name: z.string().optional(),
});

export const ChatMessageSchema = z.looseObject({
  role: z.string(),
  content: z.unknown().optional(),
  name: z.string().optional(),
  audio: z.unknown().optional(),
  tool_calls: z
    .array(
      z.looseObject({
        function: z.looseObject({ name: z.string().optional(), arguments: z.string().optional() }).optional(),
      }),
    )
    .optional(),
});

export const OpenAiChatRequestSchema = z.looseObject({
  model: z.string().min(1).optional(),
  messages: z.array(ChatMessageSchema),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  max_tokens: count.nullish(),
  max_completion_tokens: count.nullish(),
  n: z.number().int().positive().nullish(),
  tools: z.array(ChatToolSchema).optional(),
  functions: z.array(z.looseObject({ name: z.string() })).optional(),
  service_tier: z.string().nullish(),
});

export const OpenAiResponsesRequestSchema = z.looseObject({
  model: z.string().min(1).optional(),
  input: z.union([z.string(), z.array(z.unknown())]).optional(),
  instructions: z.string().nullish(),
  stream: z.boolean().nullish(),
  max_output_tokens: count.nullish(),
  tools: z.array(ChatToolSchema).optional(),
  background: z.boolean().nullish(),
  service_tier: z.string().nullish(),
  max_tool_calls: count.nullish(),
});

/** Context a Responses request refers to on OpenAI's side: an earlier response, a conversation, a stored prompt. */
const SERVER_CONTEXT = ['previous_response_id', 'conversation', 'prompt'] as const;

/**
 * Fields by which an OpenAI-compatible router serves another model than `model` names when that one
 * fails or is busy (OpenRouter's `models`, LiteLLM's `fallbacks` and `context_window_fallback_dict`).
 * Policies and prices judge the model named, so a denied or dearer model could answer: refused.
 * OpenAI itself knows none of them. Compared in any case, as a server decoding with Go's
 * `encoding/json` matches keys.
 */
const OTHER_MODELS = new Set(['models', 'fallbacks', 'context_window_fallback_dict']);

export function refuseOtherModels(body: unknown): void {
  if (typeof body !== 'object' || body === null) return;
  for (const [key, value] of Object.entries(body)) {
    if (value == null || !OTHER_MODELS.has(key.toLowerCase())) continue;
    throw new SvcError(
      'SVC-ADP-5003',
      `${key}: a router may serve another model than \`model\` names from it, which the policies did not judge nor the budget price; it is refused (name the one model to call)`,
      { fields: key },
      [{ field: key, description: 'models other than `model` are not governed' }],
    );
  }
}

const BACKGROUND =
  "background: a background response is generated after the call returns and read back later, out of the proxy's sight, so its usage and tool calls could not be governed; it is refused (send the request in the foreground, streamed if it runs long)";

const AGENT_DEFINED: ReadonlySet<unknown> = new Set(['function', 'custom']);

/**
 * Where a remote MCP server OpenAI is to call is (its URL gives a rule `tool_hosts`), never the
 * credentials its declaration carries.
 */
function mcpServer(tool: z.infer<typeof ChatToolSchema>): string {
  const { server_label, server_url, connector_id, allowed_tools, require_approval } = tool;
  return JSON.stringify({ server_label, server_url, connector_id, allowed_tools, require_approval });
}

/**
 * The fee a Responses tool of this type bills per use, by its dated versions too: the preview
 * web search's own, the web search's, the file search's; the code interpreter's per container.
 */
export function openAiHostedTool(type: string): HostedTool | undefined {
  if (type.startsWith('web_search_preview')) return 'web_search_preview';
  if (type.startsWith('web_search')) return 'web_search';
  if (type === 'file_search' || type === 'code_interpreter') return type;
  return undefined;
}

/** A built-in's kind: its type without a preview or version suffix (`web_search_preview_2025_03_11`). */
function kindOf(type: string): string {
  return type.replace(/(?:_preview)?(?:_\d{4}_\d{2}_\d{2}|_\d{8})?$/, '');
}

const IMAGE_QUALITIES: ReadonlySet<unknown> = new Set(['low', 'medium', 'high']);
const SQUARE = '1024x1024';
const OBLONG: ReadonlySet<unknown> = new Set(['1024x1536', '1536x1024']);

/**
 * The fee of one image of the image generation tool, by its quality and size: a quality or size
 * OpenAI lists no price for (`auto` included, before the answer says which it chose) takes the
 * dearest, high and 1536 pixels on the longer side.
 */
export function imageFee(quality: unknown, size: unknown): HostedTool {
  const q = IMAGE_QUALITIES.has(quality) ? (quality as 'low' | 'medium' | 'high') : 'high';
  if (size === SQUARE) return `image_${q}_1024`;
  return OBLONG.has(size) ? `image_${q}_1536` : 'image_high_1536';
}

/**
 * A Chat Completions model that searches the web on every call (`gpt-4o-search-preview`,
 * `gpt-4o-mini-search-preview`): each call is a search, billed at the preview search's fee.
 */
export function searchesEveryCall(model: string): boolean {
  return /-search(-|$)/i.test(model);
}

/** The one search a search model's chat call is billed for. */
export const SEARCH_MODEL_USE = { web_search_preview: 1 } as const satisfies HostedUses;

/** What a request's tools declare, for the policies and the reservation. */
type DeclaredTools = Pick<ParsedRequest, 'declaredTools' | 'builtinTools' | 'hostedUses' | 'unlistedMcpServers'>;

/**
 * A search model's chat call searches the web whatever its tools: it is judged as declaring
 * `web_search`, before the search runs, and billed its one search.
 */
function searchModelTools(model: string, tools: DeclaredTools): DeclaredTools {
  if (!searchesEveryCall(model)) return tools;
  return {
    ...tools,
    declaredTools: [...tools.declaredTools, 'web_search'],
    builtinTools: [...tools.builtinTools, { name: 'web_search', arguments: '' }],
    hostedUses: { ...SEARCH_MODEL_USE },
  };
}

/**
 * The request's tools by name (a built-in by its type) and, among them, those OpenAI defines:
 * any type but a function or a custom tool. A tool OpenAI bills per use is reserved for
 * `maxToolCalls` uses (the Responses limit on built-in tool calls), a code interpreter for one
 * container.
 */
function toolsOf(
  tools: readonly z.infer<typeof ChatToolSchema>[] | undefined,
  functions: readonly { name: string }[] = [],
  maxToolCalls?: number | null,
): DeclaredTools {
  const declaredTools: string[] = [];
  const builtinTools: ToolCall[] = [];
  const hostedUses: HostedUses = {};
  const unlistedMcpServers: string[] = [];
  for (const [i, t] of (tools ?? []).entries()) {
    const name = t.function?.name ?? t.custom?.name ?? t.name ?? t.type ?? 'unknown';
    declaredTools.push(name);
    if (t.type === undefined || AGENT_DEFINED.has(t.type)) continue;
    const args = t.type === 'mcp' ? mcpServer(t) : '';
    const allowed = t.type === 'mcp' ? mcpAllowedTools(t.allowed_tools) : [];
    // A server that asks before every call has each call judged in the answer that asks.
    if (allowed === undefined && !approvesEveryCall(t.require_approval, t.allowed_tools))
      unlistedMcpServers.push(`tools[${i}].allowed_tools`);
    // A built-in is judged under every name a rule could give it: as declared, by its type (a
    // `name` beside the type does not rename what OpenAI runs) and by its kind without a preview
    // or version suffix, so `tool:web_search` stops `web_search_preview_2025_03_11` too.
    for (const judged of new Set([name, t.type, kindOf(t.type), ...(allowed ?? [])])) {
      if (judged !== name) declaredTools.push(judged);
      builtinTools.push({ name: judged, arguments: args });
    }
    const hosted = t.type === 'image_generation' ? imageFee(t.quality, t.size) : openAiHostedTool(t.type);
    if (hosted !== undefined) allowHostedUses(hostedUses, hosted, hosted === 'code_interpreter' ? 1 : maxToolCalls);
  }
  for (const f of functions) declaredTools.push(f.name);
  return { declaredTools, builtinTools, ...hostedUsesOf(hostedUses), ...unlistedOf(unlistedMcpServers) };
}

/** The model a route's URL names (an Azure deployment) is the one served, whatever the body says. */
export function requireModel(model: string | undefined, pathModel: string | undefined): string {
  const resolved = pathModel ?? model;
  if (resolved === undefined) {
    throw new SvcError('SVC-SYS-9002', 'invalid request: model: required', { fields: 'model' }, [
      { field: 'model', description: 'required' },
    ]);
  }
  return resolved;
}

function chatMessageText(m: z.infer<typeof ChatMessageSchema>): ChatMessageText {
  let content = textOf(m.content);
  for (const call of m.tool_calls ?? []) content += (call.function?.name ?? '') + (call.function?.arguments ?? '');
  return { role: m.role, content, name: m.name };
}

export function nonTextAmounts(deps: AdapterDeps): NonTextAmounts {
  return { image: IMAGE_TOKENS.openai, unknown: deps.serverContextTokens };
}

/**
 * The chat messages' parts that are not text, and each earlier audio answer a message refers to
 * by id (`audio: { id }`), held on OpenAI's side at a size the proxy cannot see.
 */
function chatNonTextTokens(deps: AdapterDeps, messages: readonly z.infer<typeof ChatMessageSchema>[]): number {
  const amounts = nonTextAmounts(deps);
  let tokens = 0;
  for (const m of messages) tokens += nonTextTokens(m.content, amounts) + (m.audio != null ? amounts.unknown : 0);
  return tokens;
}

/** The input tokens of chat messages: their text with its framing, and their parts that are not text. */
export function chatMessagesTokens(
  deps: AdapterDeps,
  model: string,
  messages: readonly z.infer<typeof ChatMessageSchema>[],
): number {
  return deps.tokens.countChatMessages(model, messages.map(chatMessageText)) + chatNonTextTokens(deps, messages);
}

function toolsTokens(deps: AdapterDeps, model: string, tools: readonly unknown[] | undefined): number {
  return tools && tools.length > 0 ? deps.tokens.countText(model, JSON.stringify(tools)) : 0;
}

/**
 * A request for the priority tier, reserved at its rates. `auto` is not one: a project may make
 * priority its default, and such a call is priced at the tier its answer names.
 */
function priority(serviceTier: string | null | undefined): Pick<ParsedRequest, 'serviceTier'> {
  return serviceTier === 'priority' ? { serviceTier: 'priority' } : {};
}

/** Reads an OpenAI-format request; `pathModel` is the model a URL names (Azure deployments). */
export function parseOpenAiRequest(
  deps: AdapterDeps,
  op: Operation,
  body: unknown,
  pathModel: string | undefined,
): ParsedRequest {
  refuseOtherModels(body);
  if (op === 'responses') {
    const req = parseOrThrow(OpenAiResponsesRequestSchema, body);
    if (req.background === true) {
      throw new SvcError('SVC-ADP-5003', BACKGROUND, { fields: 'background' }, [
        { field: 'background', description: 'background responses are not governed' },
      ]);
    }
    const model = requireModel(req.model, pathModel);
    const messages: ChatMessageText[] = [];
    if (req.instructions) messages.push({ role: 'system', content: req.instructions });
    if (typeof req.input === 'string') messages.push({ role: 'user', content: req.input });
    else for (const item of req.input ?? []) messages.push({ role: 'user', content: textOf([item]) });
    return {
      model,
      stream: req.stream === true,
      estimatedInputTokens:
        deps.tokens.countChatMessages(model, messages) +
        toolsTokens(deps, model, req.tools) +
        (typeof req.input === 'string' ? 0 : nonTextTokens(req.input, nonTextAmounts(deps))) +
        (SERVER_CONTEXT.some((field) => req[field] != null) ? deps.serverContextTokens : 0),
      maxOutputTokens: req.max_output_tokens ?? deps.defaultMaxOutputTokens(model),
      ...toolsOf(req.tools, [], req.max_tool_calls),
      ...priority(req.service_tier),
    };
  }
  const req = parseOrThrow(OpenAiChatRequestSchema, body);
  const model = requireModel(req.model, pathModel);
  const perChoice = req.max_completion_tokens ?? req.max_tokens ?? deps.defaultMaxOutputTokens(model);
  return {
    model,
    stream: req.stream === true,
    estimatedInputTokens:
      chatMessagesTokens(deps, model, req.messages) + toolsTokens(deps, model, req.tools ?? req.functions),
    maxOutputTokens: perChoice * (req.n ?? 1),
    ...searchModelTools(model, toolsOf(req.tools, req.functions)),
    ...priority(req.service_tier),
  };
}
