import type { AdapterDeps, Operation, ProviderAdapter, ProviderId } from './adapter.ts';
import { errorReplies } from './error-format.ts';
import { asObject, pathOnly } from './json-access.ts';
import { parseOpenAiRequest } from './openai-request.ts';
import { chatStreamDialect, OPENAI_ERRORS, readOpenAiResponse, responsesStreamDialect } from './openai-response.ts';
import { createStreamMeter } from './stream-meter.ts';

/** The parts that differ between servers speaking the OpenAI wire format. */
export interface OpenAiFlavour {
  id: ProviderId;
  hosts: readonly string[];
  reversePrefix: string;
  /**
   * Add `stream_options.include_usage` to streamed chat requests that lack it, so the answer
   * is metered from the provider's own count (reasoning tokens included, which no token
   * counter can see); the extra usage chunk is hidden from clients that did not ask for it.
   * Off for servers that may reject the option; their streams are metered with tiktoken.
   */
  injectStreamUsage: boolean;
  /** The model a URL names when the body has none (Azure deployments). */
  modelFromPath?: (path: string) => string | undefined;
}

export const OPENAI_FLAVOUR: OpenAiFlavour = {
  id: 'openai',
  hosts: ['api.openai.com'],
  reversePrefix: '/openai',
  injectStreamUsage: true,
};

function classifyOpenAiPath(method: string, path: string): Operation | null {
  if (method.toUpperCase() !== 'POST') return null;
  const p = pathOnly(path);
  if (p.endsWith('/chat/completions')) return 'chat';
  if (p.endsWith('/responses')) return 'responses';
  if (p.endsWith('/embeddings')) return 'embeddings';
  return null;
}

export function createOpenAiAdapter(deps: AdapterDeps, flavour: OpenAiFlavour = OPENAI_FLAVOUR): ProviderAdapter {
  return {
    id: flavour.id,
    hosts: flavour.hosts,
    reversePrefix: flavour.reversePrefix,
    classify: classifyOpenAiPath,
    parseRequest(op, body, path) {
      return parseOpenAiRequest(deps, op, body, flavour.modelFromPath?.(path));
    },
    prepareRequest(op, body) {
      // The body was validated by parseRequest; only the two fields that matter are read here.
      const request = asObject(body);
      const streamOptions = asObject(request?.stream_options);
      if (
        op !== 'chat' ||
        !flavour.injectStreamUsage ||
        request?.stream !== true ||
        streamOptions?.include_usage === true
      ) {
        return { body, modified: false, hideStreamUsage: false };
      }
      return {
        body: { ...request, stream_options: { ...streamOptions, include_usage: true } },
        modified: true,
        hideStreamUsage: true,
      };
    },
    readResponse(op, json, estimatedInputTokens) {
      return readOpenAiResponse(deps, op, json, estimatedInputTokens);
    },
    createStreamMeter(op, model, options = {}) {
      const dialect = op === 'responses' ? responsesStreamDialect : chatStreamDialect(options.hideStreamUsage === true);
      return createStreamMeter(dialect, {
        model,
        tokens: deps.tokens,
        estimatedInputTokens: options.estimatedInputTokens ?? 0,
        maxEventBytes: deps.maxEventBytes,
      });
    },
    ...errorReplies(OPENAI_ERRORS),
  };
}
