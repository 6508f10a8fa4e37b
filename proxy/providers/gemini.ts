import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { parseOrThrow, SvcError, type SvcCode } from '../../core/errors/index.ts';
import type { TokenUsage } from '../../core/metering/prices.ts';
import type { ChatMessageText } from '../../core/metering/tokens.ts';
import { resolveInput, type AdapterDeps, type ParsedRequest, type ProviderAdapter, type ToolCall } from './adapter.ts';
import { codedMessage, errorReplies, grpcStatusName, type ErrorFormat } from './error-format.ts';
import { parseGeminiEmbedRequest } from './gemini-embed.ts';
import { geminiAmounts, partsText } from './gemini-parts.ts';
import { nonTextTokens } from './non-text-input.ts';
import { asArray, asCount, asObject, asString, type JsonObject } from './json-access.ts';
import { compileRoutes, GEMINI_ROUTES, geminiModelFromPath, geminiModelNamedIn, meteredOperation } from './routes.ts';
import { createStreamMeter, eventObject, type StreamDialect } from './stream-meter.ts';

const count = z.number().int().nonnegative();

/**
 * Proto JSON takes a field by its camelCase or its snake_case name. A body that gives both could
 * be read one way here and the other way by Google (a bound of 1 reserved, 65,536 generated; a
 * tool declared under the name not read), so it is refused, naming the field.
 */
function oneSpelling<T extends z.ZodType<Record<string, unknown>>>(schema: T, pairs: readonly [string, string][]): T {
  return schema.superRefine((value, ctx) => {
    for (const [camel, snake] of pairs) {
      if (value[camel] !== undefined && value[snake] !== undefined)
        ctx.addIssue({ code: 'custom', path: [snake], message: `also given as ${camel}: give one of the two` });
    }
  });
}

const FunctionDeclarations = z.array(z.looseObject({ name: z.string() }));
const GenerationConfig = oneSpelling(
  z.looseObject({
    maxOutputTokens: count.optional(),
    max_output_tokens: count.optional(),
    candidateCount: z.number().int().positive().optional(),
    candidate_count: z.number().int().positive().optional(),
  }),
  [
    ['maxOutputTokens', 'max_output_tokens'],
    ['candidateCount', 'candidate_count'],
  ],
);

const GeminiToolSchema = oneSpelling(
  z.looseObject({
    functionDeclarations: FunctionDeclarations.optional(),
    function_declarations: FunctionDeclarations.optional(),
  }),
  [['functionDeclarations', 'function_declarations']],
);

/** Gemini's REST surface accepts proto JSON, so both camelCase and snake_case names are read. */
export const GeminiGenerateRequestSchema = oneSpelling(
  z.looseObject({
    contents: z.array(z.looseObject({ role: z.string().optional(), parts: z.array(z.unknown()).optional() })),
    systemInstruction: z.looseObject({ parts: z.array(z.unknown()).optional() }).optional(),
    system_instruction: z.looseObject({ parts: z.array(z.unknown()).optional() }).optional(),
    generationConfig: GenerationConfig.optional(),
    generation_config: GenerationConfig.optional(),
    tools: z.array(GeminiToolSchema).optional(),
  }),
  [
    ['systemInstruction', 'system_instruction'],
    ['generationConfig', 'generation_config'],
    ['cachedContent', 'cached_content'],
    ['toolConfig', 'tool_config'],
  ],
);

export { geminiModelFromPath };

const ROUTES = compileRoutes(GEMINI_ROUTES);

function geminiUsage(meta: JsonObject | undefined): Partial<TokenUsage> | undefined {
  if (!meta) return undefined;
  const prompt = asCount(meta.promptTokenCount);
  const candidates = asCount(meta.candidatesTokenCount);
  const thoughts = asCount(meta.thoughtsTokenCount) ?? 0;
  const result: Partial<TokenUsage> = {};
  if (prompt !== undefined) {
    result.input = prompt + (asCount(meta.toolUsePromptTokenCount) ?? 0);
    result.cachedInput = asCount(meta.cachedContentTokenCount) ?? 0;
  }
  if (candidates !== undefined || thoughts > 0) result.output = (candidates ?? 0) + thoughts;
  return result;
}

interface CandidateReading {
  text: string;
  toolCalls: ToolCall[];
  finished: boolean;
  /** The answer was grounded with Google Search, billed per grounded prompt. */
  grounded: boolean;
}

/** The tools that ground an answer with Google Search, as `toolsOf` names them. */
const SEARCH_TOOLS: ReadonlySet<string> = new Set(['google_search', 'google_search_retrieval']);
/** The tools that search the web for the model, grounding billed or not. */
const WEB_SEARCHES: ReadonlySet<string> = new Set([...SEARCH_TOOLS, 'enterprise_web_search']);

/** A candidate's grounding metadata shows Google Search ran: its queries, its search entry point or a web source. */
function searched(metadata: JsonObject | undefined): boolean {
  if (metadata === undefined) return false;
  return (
    asArray(metadata.webSearchQueries).length > 0 ||
    metadata.searchEntryPoint !== undefined ||
    asArray(metadata.groundingChunks).some((chunk) => asObject(chunk)?.web !== undefined)
  );
}

const FUNCTION_DECLARATIONS = new Set(['functionDeclarations', 'function_declarations']);

/**
 * The tools a request declares: its functions by name, and the tools Google defines
 * (`codeExecution`, `googleSearch`, `urlContext`, ...), built in, by their field in snake_case,
 * so `code_execution` names the tool here as it names its calls in the answer.
 */
function toolsOf(
  tools: readonly z.infer<typeof GeminiToolSchema>[],
): Pick<ParsedRequest, 'declaredTools' | 'builtinTools' | 'hostedUses'> {
  const declaredTools: string[] = [];
  const builtinTools: ToolCall[] = [];
  let grounding = false;
  for (const tool of tools) {
    for (const f of tool.functionDeclarations ?? tool.function_declarations ?? []) declaredTools.push(f.name);
    for (const key of Object.keys(tool)) {
      if (FUNCTION_DECLARATIONS.has(key)) continue;
      const name = key.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
      // Every search Google runs is also judged as `google_search`, the name a rule gives search.
      for (const judged of new Set([name, WEB_SEARCHES.has(name) ? 'google_search' : name])) {
        declaredTools.push(judged);
        builtinTools.push({ name: judged, arguments: '' });
      }
      grounding ||= SEARCH_TOOLS.has(name);
    }
  }
  // Grounding bills once per prompt, however many searches it runs.
  return { declaredTools, builtinTools, ...(grounding ? { hostedUses: { google_search: 1 } } : {}) };
}

const CODE_EXECUTION = 'code_execution';
/** The one use grounding bills a prompt, whichever chunks of its stream show it. */
const GROUNDED_PROMPT = 'prompt';

function readCandidates(json: JsonObject): CandidateReading {
  const reading: CandidateReading = { text: '', toolCalls: [], finished: false, grounded: false };
  for (const candidate of asArray(json.candidates)) {
    const c = asObject(candidate);
    if (!c) continue;
    if (asString(c.finishReason) !== undefined) reading.finished = true;
    if (searched(asObject(c.groundingMetadata))) reading.grounded = true;
    for (const part of asArray(asObject(c.content)?.parts)) {
      const p = asObject(part);
      if (!p) continue;
      const text = asString(p.text);
      if (text) reading.text += text;
      const call = asObject(p.functionCall);
      const name = asString(call?.name);
      if (name !== undefined) {
        const args = JSON.stringify(call?.args ?? {});
        reading.toolCalls.push({ name, arguments: args });
        reading.text += name + args;
      }
      // Code the model wrote for Gemini's code execution tool, which Google runs itself: a tool
      // call all the same, judged as `code_execution`.
      const code = asObject(p.executableCode);
      if (code !== undefined) {
        const source = asString(code.code) ?? '';
        reading.toolCalls.push({ name: CODE_EXECUTION, arguments: source });
        reading.text += source;
      }
    }
  }
  return reading;
}

/** Google's error shape; in a stream it is a bare data event (SSE) or the closing array element. */
const GEMINI_ERRORS: ErrorFormat = {
  streamEventName: undefined,
  payload: (svcCode: SvcCode, message: string, status: number) => ({
    error: {
      code: status,
      message: codedMessage(svcCode, message),
      status: grpcStatusName(svcCode),
      details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: svcCode, domain: 'svc' }],
    },
  }),
};

let calls = 0;

const generateStreamDialect: StreamDialect = {
  framing: 'auto',
  errorFormat: GEMINI_ERRORS,
  onEvent(event, acc) {
    const json = eventObject(event, acc);
    if (!json) return true;
    if (json.error !== undefined) {
      acc.finish();
      return true;
    }
    const reading = readCandidates(json);
    if (reading.text) acc.text(reading.text);
    // Gemini sends each function call whole, arguments and all, in one part.
    for (const call of reading.toolCalls) {
      const key = `call-${++calls}`;
      acc.toolStart(key, call.name, call.arguments);
      acc.toolEnd(key);
    }
    if (reading.grounded) acc.hostedUse('google_search', GROUNDED_PROMPT);
    const usage = geminiUsage(asObject(json.usageMetadata));
    if (usage) acc.reportUsage(usage, reading.finished);
    if (reading.finished) acc.finish();
    return true;
  },
};

/**
 * Google's system parameters of its every API that change what an answer holds or how it is
 * written. A response field mask (`fields` or `$fields` in the query, `X-Goog-FieldMask` as a
 * header) trims the answer to the fields named, so it can drop `usageMetadata` (a thinking
 * model's hidden output tokens would then go uncounted) and parts. `alt` other than `json` or
 * `sse` (`proto`, `media`) writes it in a form the proxy does not read, and `callback` wraps it in
 * JSONP: its tool calls would go unjudged. `$ct` replaces the request's content type, so the
 * provider could read the body otherwise than the proxy did.
 */
function answerShaping(url: URL, headers: IncomingHttpHeaders): string | undefined {
  if (headers['x-goog-fieldmask'] !== undefined) return 'X-Goog-FieldMask';
  for (const [key, value] of url.searchParams) {
    if (/^(\$?(fields|callback)|\$ct)$/i.test(key)) return key;
    if (/^\$?alt$/i.test(key) && !/^(json|sse)$/i.test(value)) return `${key}=${value}`;
  }
  return undefined;
}

export function createGeminiAdapter(deps: AdapterDeps): ProviderAdapter {
  return {
    id: 'gemini',
    hosts: ['generativelanguage.googleapis.com'],
    reversePrefix: '/gemini',
    route: (method, path) => ROUTES.match(method, path),
    classify: (method, path) => meteredOperation(ROUTES.match(method, path)),
    modelNamedIn: geminiModelNamedIn,
    hidingParameter: answerShaping,
    parseRequest(op, body, path) {
      const model = geminiModelFromPath(path);
      if (model === undefined) {
        throw new SvcError(
          'SVC-SYS-9002',
          'invalid request: path: expected /models/{model}:generateContent',
          { fields: 'path' },
          [{ field: 'path', description: 'expected /models/{model}:generateContent or :streamGenerateContent' }],
        );
      }
      if (op === 'embed' || op === 'batch_embed')
        return parseGeminiEmbedRequest(deps, model, body, op === 'batch_embed');
      const req = parseOrThrow(GeminiGenerateRequestSchema, body);
      const messages: ChatMessageText[] = req.contents.map((c) => ({
        role: c.role ?? 'user',
        content: partsText(c.parts),
      }));
      const system = req.systemInstruction ?? req.system_instruction;
      if (system) messages.unshift({ role: 'system', content: partsText(system.parts) });
      const amounts = geminiAmounts(deps);
      let nonText = nonTextTokens(system?.parts, amounts);
      for (const c of req.contents) nonText += nonTextTokens(c.parts, amounts);
      const config = req.generationConfig ?? req.generation_config;
      const perCandidate = config?.maxOutputTokens ?? config?.max_output_tokens ?? deps.defaultMaxOutputTokens(model);
      return {
        model,
        stream: op === 'stream_generate',
        estimatedInputTokens:
          deps.tokens.countChatMessages(model, messages) +
          nonText +
          (req.tools ? deps.tokens.countText(model, JSON.stringify(req.tools)) : 0) +
          // Cached content is context on Google's side, which the proxy cannot count.
          (req.cachedContent != null || req.cached_content != null ? deps.serverContextTokens : 0),
        maxOutputTokens: perCandidate * (config?.candidateCount ?? config?.candidate_count ?? 1),
        ...toolsOf(req.tools ?? []),
      };
    },
    prepareRequest(_op, body) {
      return { body, modified: false, hideStreamUsage: false };
    },
    readResponse(_op, body, estimatedInputTokens) {
      const json = asObject(body) ?? {};
      const model = asString(json.modelVersion) ?? '';
      const reading = readCandidates(json);
      const hosted = reading.grounded ? { hosted: { google_search: 1 } } : {};
      const usage = geminiUsage(asObject(json.usageMetadata));
      if (usage?.input !== undefined) {
        return {
          usage: {
            input: usage.input,
            output: usage.output ?? deps.tokens.countText(model, reading.text),
            cachedInput: usage.cachedInput ?? 0,
            ...hosted,
          },
          usageSource: 'provider',
          toolCalls: reading.toolCalls,
          model,
        };
      }
      return {
        usage: {
          input: resolveInput(estimatedInputTokens),
          output: deps.tokens.countText(model, reading.text),
          cachedInput: 0,
          ...hosted,
        },
        usageSource: 'estimated',
        toolCalls: reading.toolCalls,
        model,
      };
    },
    createStreamMeter(_op, model, options = {}) {
      return createStreamMeter(generateStreamDialect, {
        model,
        tokens: deps.tokens,
        estimatedInputTokens: options.estimatedInputTokens ?? 0,
        maxEventBytes: deps.maxEventBytes,
        maxToolArgsChars: deps.maxToolArgsChars,
      });
    },
    ...errorReplies(GEMINI_ERRORS),
  };
}
