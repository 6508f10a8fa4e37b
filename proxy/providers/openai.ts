import type { AdapterDeps, ProviderAdapter, ProviderId } from './adapter.ts';
import { errorReplies } from './error-format.ts';
import { asObject } from './json-access.ts';
import { parseOpenAiCompletionsRequest } from './openai-completions.ts';
import { parseOpenAiEmbeddingsRequest } from './openai-embeddings.ts';
import { parseOpenAiRequest } from './openai-request.ts';
import {
  chatStreamDialect,
  OPENAI_ERRORS,
  readOpenAiResponse,
  responsesStreamDialect,
  storedToolCalls,
} from './openai-response.ts';
import { compileRoutes, meteredOperation, openAiRoutes, type RouteTable } from './routes.ts';
import { createStreamMeter } from './stream-meter.ts';

/** The parts that differ between servers speaking the OpenAI wire format. */
export interface OpenAiFlavour {
  id: ProviderId;
  hosts: readonly string[];
  reversePrefix: string;
  /** The routes it meters (exact patterns, see routes.ts). */
  routes: RouteTable;
  /**
   * Add `stream_options.include_usage` to streamed chat requests that lack it, so the answer
   * is metered from the provider's own count (reasoning tokens included, which no token
   * counter can see); the extra usage chunk is hidden from clients that did not ask for it.
   * Off for servers that may reject the option; their streams are metered with tiktoken.
   */
  injectStreamUsage: boolean;
  /** The model a route's URL names, served whatever the body claims (Azure deployments). */
  modelFromPath?: (path: string) => string | undefined;
  /** See `ProviderAdapter.modelNamedIn`. */
  modelNamedIn?: (path: string) => string | undefined;
}

export const OPENAI_FLAVOUR: OpenAiFlavour = {
  id: 'openai',
  hosts: ['api.openai.com'],
  reversePrefix: '/openai',
  routes: compileRoutes(openAiRoutes(['/v1'])),
  injectStreamUsage: true,
};

export function createOpenAiAdapter(deps: AdapterDeps, flavour: OpenAiFlavour = OPENAI_FLAVOUR): ProviderAdapter {
  return {
    id: flavour.id,
    hosts: flavour.hosts,
    reversePrefix: flavour.reversePrefix,
    route: (method, path) => flavour.routes.match(method, path),
    classify: (method, path) => meteredOperation(flavour.routes.match(method, path)),
    ...(flavour.modelNamedIn === undefined ? {} : { modelNamedIn: flavour.modelNamedIn }),
    parseRequest(op, body, path) {
      const pathModel = flavour.modelFromPath?.(path);
      if (op === 'completions') return parseOpenAiCompletionsRequest(deps, body, pathModel);
      if (op === 'embeddings') return parseOpenAiEmbeddingsRequest(deps, body, pathModel);
      return parseOpenAiRequest(deps, op, body, pathModel);
    },
    prepareRequest(op, body) {
      // The body was validated by parseRequest; only the two fields that matter are read here.
      const request = asObject(body);
      const streamOptions = asObject(request?.stream_options);
      if (
        (op !== 'chat' && op !== 'completions') ||
        !flavour.injectStreamUsage ||
        request?.stream !== true ||
        streamOptions?.include_usage === true
      ) {
        return { body, modified: false, hideStreamUsage: false };
      }
      const added = { stream_options: { ...streamOptions, include_usage: true } };
      return {
        body: { ...request, ...added },
        modified: true,
        hideStreamUsage: true,
        ...(Object.hasOwn(request, 'stream_options') ? {} : { added }),
      };
    },
    readResponse(op, json, estimatedInputTokens) {
      return readOpenAiResponse(deps, op, json, estimatedInputTokens);
    },
    storedToolCalls,
    createStreamMeter(op, model, options = {}) {
      const dialect =
        op === 'responses' ? responsesStreamDialect() : chatStreamDialect(options.hideStreamUsage === true);
      return createStreamMeter(dialect, {
        model,
        tokens: deps.tokens,
        estimatedInputTokens: options.estimatedInputTokens ?? 0,
        maxEventBytes: deps.maxEventBytes,
        maxToolArgsChars: deps.maxToolArgsChars,
      });
    },
    ...errorReplies(OPENAI_ERRORS),
  };
}
