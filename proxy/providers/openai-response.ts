import type { SvcCode } from '../../core/errors/index.ts';
import type { HostedTool, ServiceTier, TokenUsage } from '../../core/metering/prices.ts';
import {
  resolveInput,
  type AdapterDeps,
  type InputEstimate,
  type Operation,
  type ResponseReading,
  type ToolCall,
} from './adapter.ts';
import { asArray, asCount, asObject, asString, textOf, type JsonObject } from './json-access.ts';
import { codedMessage, type ErrorFormat } from './error-format.ts';
import { HostedTally } from './hosted-tally.ts';
import { completionsText } from './openai-completions.ts';
import { imageFee, openAiHostedTool, SEARCH_MODEL_USE, searchesEveryCall } from './openai-request.ts';
import type { StoredShape } from './routes.ts';
import { eventObject, type StreamAccumulator, type StreamDialect } from './stream-meter.ts';

/**
 * Chat and embeddings report prompt/completion tokens; the Responses API input/output tokens. An
 * output count it does not give (embeddings) or that cannot be read is left out: what the answer
 * generated is then metered from its text.
 */
function openAiUsage(usage: JsonObject | undefined): Partial<TokenUsage> | undefined {
  if (!usage) return undefined;
  const input = asCount(usage.prompt_tokens) ?? asCount(usage.input_tokens);
  const output = asCount(usage.completion_tokens) ?? asCount(usage.output_tokens);
  const details = asObject(usage.prompt_tokens_details) ?? asObject(usage.input_tokens_details);
  if (input === undefined) return undefined;
  return { input, ...(output === undefined ? {} : { output }), cachedInput: asCount(details?.cached_tokens) ?? 0 };
}

/**
 * The text a chat message or stream delta generated: its content, a refusal, and the reasoning
 * that OpenAI-compatible servers (vLLM, DeepSeek) send beside it. All of it is metered when the
 * server reports no usage; one may come with the others empty.
 */
function generatedText(message: JsonObject): string {
  return textOf(message.content) + (asString(message.refusal) ?? '') + (asString(message.reasoning_content) ?? '');
}

/**
 * A chat tool call, whole or as a stream delta: a function (`function.name`, `function.arguments`)
 * or a custom tool (`custom.name`, `custom.input`, free text instead of JSON arguments).
 */
function chatToolCall(call: unknown): { name: string | undefined; args: string | undefined } {
  const c = asObject(call);
  const fn = asObject(c?.function);
  if (fn) return { name: asString(fn.name), args: asString(fn.arguments) };
  const custom = asObject(c?.custom);
  return { name: asString(custom?.name), args: asString(custom?.input) };
}

function chatToolCalls(json: JsonObject): { calls: ToolCall[]; text: string } {
  const calls: ToolCall[] = [];
  let text = '';
  for (const choice of asArray(json.choices)) {
    const message = asObject(asObject(choice)?.message);
    if (!message) continue;
    text += generatedText(message);
    for (const call of asArray(message.tool_calls)) {
      const { name, args } = chatToolCall(call);
      if (name !== undefined) calls.push({ name, arguments: args ?? '' });
      text += args ?? '';
    }
    const legacy = asObject(message.function_call);
    const legacyName = asString(legacy?.name);
    const legacyArgs = asString(legacy?.arguments) ?? '';
    if (legacyName !== undefined) calls.push({ name: legacyName, arguments: legacyArgs });
    text += legacyArgs;
  }
  return { calls, text };
}

/**
 * What a Responses tool call will do: a function's JSON `arguments`, a custom tool's or a remote
 * MCP tool's input, the code interpreter's code, or the action of a shell, a computer, a search or
 * a patch as JSON. Undefined when the item holds none yet.
 */
function callArguments(item: JsonObject): string | undefined {
  const text = asString(item.arguments) ?? asString(item.input) ?? asString(item.code);
  if (text !== undefined) return text;
  const detail = item.action ?? item.operation ?? item.queries;
  return detail === undefined ? undefined : JSON.stringify(detail);
}

const CALL_SUFFIX = '_call';

/**
 * A Responses output item that is a tool call: every item whose type ends in `_call`, whether the
 * client runs it (a function, a custom tool, a local shell, the computer, a patch) or OpenAI runs
 * it (a web or file search, the code interpreter, image generation, a remote MCP server's tool),
 * and a remote MCP call that asks the client's approval. It is named by its tool where the item
 * names one, else by its kind (`local_shell`, `web_search`). A kind not known here is still a
 * call, judged by that kind: a tool OpenAI adds is never let through unjudged.
 */
function responsesToolCall(item: JsonObject | undefined): { name: string; args: string | undefined } | undefined {
  const type = asString(item?.type);
  if (item === undefined || type === undefined) return undefined;
  const kind = type.endsWith(CALL_SUFFIX) ? type.slice(0, -CALL_SUFFIX.length) : undefined;
  if (kind === undefined && type !== 'mcp_approval_request') return undefined;
  return { name: asString(item.name) || kind || type, args: callArguments(item) };
}

/**
 * The fee an output item bills per use and what names that use: a web or file search call by its
 * id, a code interpreter call by its container (calls in one container are one use). A web search
 * is billed at the preview's fee when the response's tools declare the preview tool.
 */
function hostedUseOf(
  item: JsonObject | undefined,
  preview: boolean,
  fallbackId: string,
): { tool: HostedTool; id: string } | undefined {
  const id = asString(item?.id) ?? fallbackId;
  switch (item?.type) {
    case 'web_search_call':
      return { tool: preview ? 'web_search_preview' : 'web_search', id };
    case 'file_search_call':
      return { tool: 'file_search', id };
    case 'code_interpreter_call':
      return { tool: 'code_interpreter', id: asString(item.container_id) ?? id };
    case 'image_generation_call':
      return { tool: imageFee(item.quality, item.size), id };
    default:
      return undefined;
  }
}

/** Whether a response's tools declare the preview web search (its searches bill at its fee). */
function declaresPreviewSearch(response: JsonObject | undefined): boolean {
  return asArray(response?.tools).some((t) => {
    const type = asString(asObject(t)?.type);
    return type !== undefined && openAiHostedTool(type) === 'web_search_preview';
  });
}

/** Each output item's hosted-tool use, handed to `use`. */
function forEachHostedUse(response: JsonObject, use: (tool: HostedTool, id: string) => void): void {
  const preview = declaresPreviewSearch(response);
  asArray(response.output).forEach((item, at) => {
    const hosted = hostedUseOf(asObject(item), preview, `item:${at}`);
    if (hosted !== undefined) use(hosted.tool, hosted.id);
  });
}

/** A Responses answer's hosted-tool uses, counted by what names each, as a stream counts them. */
function responsesHostedUses(json: JsonObject): Pick<TokenUsage, 'hosted'> {
  const tally = new HostedTally();
  forEachHostedUse(json, (tool, id) => tally.use(tool, id));
  return tally.empty ? {} : { hosted: tally.uses() };
}

function responsesToolCalls(json: JsonObject): { calls: ToolCall[]; text: string } {
  const calls: ToolCall[] = [];
  let text = '';
  for (const item of asArray(json.output)) {
    const it = asObject(item);
    if (!it) continue;
    const call = responsesToolCall(it);
    if (call !== undefined) {
      calls.push({ name: call.name, arguments: call.args ?? '' });
      text += call.args ?? '';
    } else {
      text += textOf(it.content);
    }
  }
  return { calls, text };
}

/**
 * The tier an answer says it was served at (`service_tier`): `priority`, or standard for any other
 * it names (`default`, `flex`, `scale`); undefined when it names none.
 */
function servedTier(value: unknown): ServiceTier | undefined {
  if (typeof value !== 'string') return undefined;
  return value === 'priority' ? 'priority' : 'standard';
}

export function readOpenAiResponse(
  deps: AdapterDeps,
  op: Operation,
  body: unknown,
  estimatedInputTokens?: InputEstimate,
): ResponseReading {
  const json = asObject(body) ?? {};
  const model = asString(json.model) ?? '';
  const { calls, text } =
    op === 'responses'
      ? responsesToolCalls(json)
      : op === 'chat'
        ? chatToolCalls(json)
        : { calls: [], text: op === 'completions' ? completionsText(json) : '' };
  const serviceTier = servedTier(json.service_tier);
  const tier = serviceTier === undefined ? {} : { serviceTier };
  const hosted =
    op === 'responses'
      ? responsesHostedUses(json)
      : op === 'chat' && searchesEveryCall(model)
        ? { hosted: { ...SEARCH_MODEL_USE } }
        : {};
  const reported = openAiUsage(asObject(json.usage));
  if (reported) {
    return {
      usage: {
        input: reported.input ?? 0,
        output: reported.output ?? deps.tokens.countText(model, text),
        cachedInput: reported.cachedInput ?? 0,
        ...hosted,
      },
      usageSource: 'provider',
      toolCalls: calls,
      model,
      ...tier,
    };
  }
  return {
    usage: {
      input: resolveInput(estimatedInputTokens),
      output: deps.tokens.countText(model, text),
      cachedInput: 0,
      ...hosted,
    },
    usageSource: 'estimated',
    toolCalls: calls,
    model,
    ...tier,
  };
}

/**
 * The tool calls of answers OpenAI stored, read back in the shape their route serves them in;
 * undefined for a shape OpenAI does not serve.
 */
export function storedToolCalls(shape: StoredShape, body: unknown): ToolCall[] | undefined {
  const json = asObject(body) ?? {};
  switch (shape) {
    case 'response':
      return responsesToolCalls(json).calls;
    case 'completion':
      return chatToolCalls(json).calls;
    case 'completions':
      return asArray(json.data).flatMap((completion) => chatToolCalls(asObject(completion) ?? {}).calls);
    case 'items':
      return responsesToolCalls({ output: asArray(json.data) }).calls;
    case 'item':
      return responsesToolCalls({ output: [json] }).calls;
    case 'batch_results':
      return undefined;
  }
}

function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * The one error format of the OpenAI wire family (OpenAI, Azure OpenAI, OpenAI-compatible servers).
 * The SDK raises an `event: error` frame (and any data with an `error` member) as an APIError
 * carrying `error.message`, in both chat and Responses streams.
 */
export const OPENAI_ERRORS: ErrorFormat = {
  streamEventName: 'error',
  payload: (svcCode: SvcCode, message: string, status: number) => ({
    error: { message: codedMessage(svcCode, message), type: openAiErrorType(status), code: svcCode, param: null },
  }),
};

export function chatStreamDialect(hideStreamUsage: boolean): StreamDialect {
  let searchModel: boolean | undefined;
  return {
    framing: 'sse',
    errorFormat: OPENAI_ERRORS,
    onEvent(event, acc) {
      if (event.data === '[DONE]') {
        acc.finish();
        return true;
      }
      const json = eventObject(event, acc);
      if (!json) return true;
      if (json.error !== undefined) {
        acc.finish();
        return true;
      }
      const tier = servedTier(json.service_tier);
      if (tier !== undefined) acc.reportServiceTier(tier);
      // Every chunk names the model: whether it searches is decided once, from the first.
      if (searchModel === undefined) {
        const model = asString(json.model);
        if (model !== undefined) searchModel = searchesEveryCall(model);
        if (searchModel === true) acc.hostedUse('web_search_preview', 'call');
      }
      const choices = asArray(json.choices);
      for (let position = 0; position < choices.length; position++) {
        const c = asObject(choices[position]);
        const at = asCount(c?.index) ?? position;
        // Legacy completions stream `choices[].text` where chat streams `choices[].delta`.
        const legacy = asString(c?.text);
        if (legacy) acc.text(legacy);
        const delta = asObject(c?.delta);
        if (delta) {
          const content = generatedText(delta);
          if (content) acc.text(content);
          const calls = asArray(delta.tool_calls);
          for (let n = 0; n < calls.length; n++) {
            const call = calls[n];
            const key = `${at}:${asCount(asObject(call)?.index) ?? n}`;
            const { name, args } = chatToolCall(call);
            if (name) acc.toolStart(key, name, args ?? '');
            else if (args) acc.toolArgs(key, args);
            if (args) acc.text(args);
          }
          const fnCall = asObject(delta.function_call);
          if (fnCall) {
            const name = asString(fnCall.name);
            const args = asString(fnCall.arguments);
            if (name) acc.toolStart(`${at}:fn`, name, args ?? '');
            else if (args) acc.toolArgs(`${at}:fn`, args);
            if (args) acc.text(args);
          }
        }
        // The choice's finish closes its tool calls: they are judged before this event goes on.
        if (asString(c?.finish_reason) !== undefined) acc.toolEnd();
      }
      const usage = openAiUsage(asObject(json.usage));
      if (!usage) return true;
      acc.reportUsage(usage, true);
      // The usage-only chunk exists because the proxy asked for it: a client that did not ask never sees it.
      return !(hideStreamUsage && choices.length === 0);
    },
  };
}

/** The tool call a Responses event concerns, by the output item it belongs to. */
const itemKey = (json: JsonObject): string => String(asCount(json.output_index) ?? 0);

/**
 * A Responses stream's reading. Per call: it remembers whether the response declares the preview
 * web search (`response.created` says, before any search), which prices its searches.
 */
export function responsesStreamDialect(): StreamDialect {
  let preview = false;
  const hostedUse = (acc: StreamAccumulator, item: unknown, at: string) => {
    const use = hostedUseOf(asObject(item), preview, at);
    if (use !== undefined) acc.hostedUse(use.tool, use.id);
  };
  return {
    framing: 'sse',
    errorFormat: OPENAI_ERRORS,
    onEvent(event, acc) {
      const json = eventObject(event, acc);
      if (!json) return true;
      const type = asString(json.type) ?? event.event;
      // `response.created`, `response.in_progress`, `response.completed` and the like carry the
      // response, its tier and its tools included.
      const response = asObject(json.response);
      if (response !== undefined) {
        const tier = servedTier(response.service_tier);
        if (tier !== undefined) acc.reportServiceTier(tier);
        preview ||= declaresPreviewSearch(response);
      }
      switch (type) {
        // Text the model generates: the answer, a refusal, its reasoning as text or as a summary, an
        // audio transcript.
        case 'response.output_text.delta':
        case 'response.refusal.delta':
        case 'response.reasoning_text.delta':
        case 'response.reasoning_summary_text.delta':
        case 'response.audio.transcript.delta': {
          const delta = asString(json.delta);
          if (delta) acc.text(delta);
          break;
        }
        // A tool call's arguments as the model writes them; the call is judged once whole.
        case 'response.function_call_arguments.delta':
        case 'response.custom_tool_call_input.delta':
        case 'response.code_interpreter_call_code.delta':
        case 'response.mcp_call_arguments.delta': {
          const delta = asString(json.delta);
          if (delta) {
            acc.text(delta);
            acc.toolArgs(itemKey(json), delta);
          }
          break;
        }
        case 'response.function_call_arguments.done':
        case 'response.mcp_call_arguments.done':
          acc.toolEnd(itemKey(json), asString(json.arguments));
          break;
        case 'response.custom_tool_call_input.done':
          acc.toolEnd(itemKey(json), asString(json.input));
          break;
        case 'response.code_interpreter_call_code.done':
          acc.toolEnd(itemKey(json), asString(json.code));
          break;
        case 'response.output_item.added': {
          const call = responsesToolCall(asObject(json.item));
          if (call !== undefined) acc.toolStart(itemKey(json), call.name, call.args ?? '');
          // A search or a container is billed from when it starts, whether or not the answer ends.
          hostedUse(acc, json.item, `item:${itemKey(json)}`);
          break;
        }
        case 'response.output_item.done': {
          // The whole item replaces the arguments gathered, unless it carries none.
          const call = responsesToolCall(asObject(json.item));
          if (call !== undefined) acc.toolEnd(itemKey(json), call.args);
          hostedUse(acc, json.item, `item:${itemKey(json)}`);
          break;
        }
        case 'response.completed':
        case 'response.incomplete':
        case 'response.failed': {
          if (response !== undefined) forEachHostedUse(response, (tool, id) => acc.hostedUse(tool, id));
          const usage = openAiUsage(asObject(response?.usage));
          if (usage) acc.reportUsage(usage, true);
          acc.finish();
          break;
        }
        case 'error':
          acc.finish();
          break;
      }
      return true;
    },
  };
}
