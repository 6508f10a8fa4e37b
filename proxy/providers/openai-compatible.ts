import type { AdapterDeps, ProviderAdapter } from './adapter.ts';
import { createOpenAiAdapter } from './openai.ts';
import { compileRoutes, openAiRoutes } from './routes.ts';

export interface OpenAiCompatibleOptions {
  /** Hosts (`host` or `host:port`) of the servers, e.g. a vLLM or Ollama service. */
  hosts: readonly string[];
  /** Where the servers serve the OpenAI routes (`/v1` for vLLM and Ollama, `/api/v1` for some gateways). */
  basePaths?: readonly string[];
  /** vLLM supports `stream_options`; some servers do not, so it is opt-in. */
  injectStreamUsage?: boolean;
}

/** Self-hosted servers speaking the OpenAI wire format (vLLM, Ollama, LM Studio, llama.cpp). */
export function createOpenAiCompatibleAdapter(deps: AdapterDeps, options: OpenAiCompatibleOptions): ProviderAdapter {
  return createOpenAiAdapter(deps, {
    id: 'openai-compatible',
    hosts: options.hosts,
    reversePrefix: '/compat',
    routes: compileRoutes(openAiRoutes(options.basePaths ?? ['/v1'])),
    injectStreamUsage: options.injectStreamUsage ?? false,
  });
}
