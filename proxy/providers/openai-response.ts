import type { SvcCode } from '../../core/errors/index.ts';
import type { TokenUsage } from '../../core/metering/prices.ts';
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
import { completionsText } from './openai-completions.ts';
import { eventObject, type StreamDialect } from './stream-meter.ts';

/** Chat and embeddings report prompt/completion tokens; the Responses API input/output tokens. */
function openAiUsage(usage: JsonObject | undefined): Partial<TokenUsage> | undefined {
  if (!usage) return undefined;
  const input = asCount(usage.prompt_tokens) ?? asCount(usage.input_tokens);
  const output = asCount(usage.completion_tokens) ?? asCount(usage.output_tokens) ?? 0;
  const details = asObject(usage.prompt_tokens_details) ?? asObject(usage.input_tokens_details);
  if (input === undefined) return undefined;
  return { input, output, cachedInput: asCount(details?.cached_tokens) ?? 0 };
}

/**
 * The text a chat message or stream delta generated: its content, a refusal, and the reasoning
 * that OpenAI-compatible servers (vLLM, DeepSeek) send beside it. All of it is metered when the
 * server reports no usage; one may come with the others empty.
 */
function generatedText(message: JsonObject): string {
  return textOf(message.content) + (asString(message.refusal) ?? '') + (asString(message.reasoning_content) ?? '');
}

function chatToolCalls(json: JsonObject): { calls: ToolCall[]; text: string } {
  const calls: ToolCall[] = [];
  let text = '';
  for (const choice of asArray(json.choices)) {
    const message = asObject(asObject(choice)?.message);
    if (!message) continue;
    text += generatedText(message);
    for (const call of asArray(message.tool_calls)) {
      const fn = asObject(asObject(call)?.function);
      const name = asString(fn?.name);
      const args = asString(fn?.arguments) ?? '';
      if (name !== undefined) calls.push({ name, arguments: args });
      text += args;
    }
    const legacy = asObject(message.function_call);
    const legacyName = asString(legacy?.name);
    const legacyArgs = asString(legacy?.arguments) ?? '';
    if (legacyName !== undefined) calls.push({ name: legacyName, arguments: legacyArgs });
    text += legacyArgs;
  }
  return { calls, text };
}

function responsesToolCalls(json: JsonObject): { calls: ToolCall[]; text: string } {
  const calls: ToolCall[] = [];
  let text = '';
  for (const item of asArray(json.output)) {
    const it = asObject(item);
    if (!it) continue;
    if (it.type === 'function_call') {
      const name = asString(it.name);
      const args = asString(it.arguments) ?? '';
      if (name !== undefined) calls.push({ name, arguments: args });
      text += args;
    } else {
      text += textOf(it.content);
    }
  }
  return { calls, text };
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
  const reported = openAiUsage(asObject(json.usage));
  if (reported) {
    return {
      usage: { input: reported.input ?? 0, output: reported.output ?? 0, cachedInput: reported.cachedInput ?? 0 },
      usageSource: 'provider',
      toolCalls: calls,
      model,
    };
  }
  return {
    usage: { input: resolveInput(estimatedInputTokens), output: deps.tokens.countText(model, text), cachedInput: 0 },
    usageSource: 'estimated',
    toolCalls: calls,
    model,
  };
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
            const fn = asObject(asObject(call)?.function);
            const name = asString(fn?.name);
            const args = asString(fn?.arguments);
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

export const responsesStreamDialect: StreamDialect = {
  framing: 'sse',
  errorFormat: OPENAI_ERRORS,
  onEvent(event, acc) {
    const json = eventObject(event, acc);
    if (!json) return true;
    const type = asString(json.type) ?? event.event;
    switch (type) {
      case 'response.output_text.delta':
      case 'response.refusal.delta': {
        const delta = asString(json.delta);
        if (delta) acc.text(delta);
        break;
      }
      case 'response.function_call_arguments.delta': {
        const delta = asString(json.delta);
        if (delta) {
          acc.text(delta);
          acc.toolArgs(String(asCount(json.output_index) ?? 0), delta);
        }
        break;
      }
      case 'response.function_call_arguments.done':
        acc.toolEnd(String(asCount(json.output_index) ?? 0), asString(json.arguments));
        break;
      case 'response.output_item.added': {
        const item = asObject(json.item);
        const name = item?.type === 'function_call' ? asString(item.name) : undefined;
        if (name) acc.toolStart(String(asCount(json.output_index) ?? 0), name, asString(item?.arguments) ?? '');
        break;
      }
      case 'response.output_item.done': {
        const item = asObject(json.item);
        if (item?.type === 'function_call')
          acc.toolEnd(String(asCount(json.output_index) ?? 0), asString(item.arguments));
        break;
      }
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed': {
        const usage = openAiUsage(asObject(asObject(json.response)?.usage));
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
