import { maxOutputTokens, type PriceTable } from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { AdapterDeps, ProviderAdapter, ProviderId } from './adapter.ts';
import { createAnthropicAdapter } from './anthropic.ts';
import { createAzureOpenAiAdapter } from './azure-openai.ts';
import { createGeminiAdapter } from './gemini.ts';
import { createOpenAiCompatibleAdapter } from './openai-compatible.ts';
import { createOpenAiAdapter } from './openai.ts';
import { DEFAULT_MAX_EVENT_BYTES } from './sse-framer.ts';

export interface ReverseMatch {
  adapter: ProviderAdapter;
  /** The request path with the provider prefix removed, as the upstream expects it. */
  upstreamPath: string;
}

export interface ProviderRegistry {
  readonly adapters: readonly ProviderAdapter[];
  get(id: ProviderId): ProviderAdapter | undefined;
  /** The adapter for an intercepted host (`host` or `host:port`), or undefined to pass through. */
  forHost(host: string): ProviderAdapter | undefined;
  /** The adapter selected by a reverse-mode path prefix (`/openai/v1/chat/completions`). */
  forPath(path: string): ReverseMatch | undefined;
}

export interface DefaultAdaptersOptions {
  /** Hosts of OpenAI-compatible servers; without any, that adapter is not registered. */
  compatibleHosts?: readonly string[];
  /** Where those servers serve the OpenAI routes; `/v1` when absent. */
  compatibleBasePaths?: readonly string[];
  compatibleInjectStreamUsage?: boolean;
  azureInjectStreamUsage?: boolean;
}

const DEFAULT_JUDGED_TEXT_CHARS = 65_536;

export interface AdapterLimits {
  /** The stream event bound (proxy_stream_event_limit_bytes). */
  maxEventBytes?: number;
  /** Output bound of a model the price table gives none. */
  fallbackMaxOutputTokens?: number;
  /** What the Semantic Judge reads of a field (semantic_judge_max_text_chars). */
  judgedTextChars?: number;
  /** Input held for context a request refers to on the provider's side (proxy_server_context_tokens). */
  serverContextTokens?: number;
}

const DEFAULT_SERVER_CONTEXT_TOKENS = 128_000;

/** The answer bound of a model the price table gives none, unless the adapters are given another. */
export const FALLBACK_MAX_OUTPUT_TOKENS = 4096;

/** Adapter dependencies from the shared token counter and price table (its max_output_tokens bound requests). */
export function createAdapterDeps(tokens: TokenCounter, prices: PriceTable, limits: AdapterLimits = {}): AdapterDeps {
  const fallback = limits.fallbackMaxOutputTokens ?? FALLBACK_MAX_OUTPUT_TOKENS;
  const maxEventBytes = limits.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  return {
    tokens,
    maxEventBytes,
    // A streamed call is held until judged and the stream cut once it holds more than the event
    // bound: kept whole up to that bound, every condition reads all of it (a prefix would let
    // padding hide what follows). Always one character more than the Semantic Judge reads, so a
    // longer call is judged truncated there.
    maxToolArgsChars: Math.max((limits.judgedTextChars ?? DEFAULT_JUDGED_TEXT_CHARS) + 1, maxEventBytes),
    defaultMaxOutputTokens: (model) => maxOutputTokens(prices, model, fallback),
    serverContextTokens: limits.serverContextTokens ?? DEFAULT_SERVER_CONTEXT_TOKENS,
  };
}

export function createDefaultAdapters(deps: AdapterDeps, options: DefaultAdaptersOptions = {}): ProviderAdapter[] {
  const adapters = [
    createOpenAiAdapter(deps),
    createAnthropicAdapter(deps),
    createGeminiAdapter(deps),
    createAzureOpenAiAdapter(deps, { injectStreamUsage: options.azureInjectStreamUsage ?? false }),
  ];
  if (options.compatibleHosts && options.compatibleHosts.length > 0) {
    adapters.push(
      createOpenAiCompatibleAdapter(deps, {
        hosts: options.compatibleHosts,
        ...(options.compatibleBasePaths ? { basePaths: options.compatibleBasePaths } : {}),
        injectStreamUsage: options.compatibleInjectStreamUsage ?? false,
      }),
    );
  }
  return adapters;
}

function stripPort(host: string): string {
  if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1);
  const colon = host.lastIndexOf(':');
  return colon < 0 ? host : host.slice(0, colon);
}

/**
 * Builds the lookup once: exact hosts in a map, `*.domain` patterns as suffixes. `extraHosts`
 * adds configured hosts to an adapter (a private gateway in front of a provider, say).
 */
export function createProviderRegistry(
  adapters: readonly ProviderAdapter[],
  extraHosts: Partial<Record<ProviderId, readonly string[]>> = {},
): ProviderRegistry {
  const exact = new Map<string, ProviderAdapter>();
  const suffixes: { suffix: string; adapter: ProviderAdapter }[] = [];
  for (const adapter of adapters) {
    for (const pattern of [...adapter.hosts, ...(extraHosts[adapter.id] ?? [])]) {
      const host = pattern.toLowerCase();
      if (host.startsWith('*.')) suffixes.push({ suffix: host.slice(1), adapter });
      else exact.set(host, adapter);
    }
  }
  const byId = new Map(adapters.map((a) => [a.id, a]));
  const prefixes = adapters
    .map((adapter) => ({ prefix: adapter.reversePrefix, adapter }))
    .sort((a, b) => b.prefix.length - a.prefix.length);

  return {
    adapters,
    get: (id) => byId.get(id),
    forHost(host) {
      const h = host.toLowerCase();
      const hit = exact.get(h);
      if (hit) return hit;
      const bare = stripPort(h);
      const bareHit = exact.get(bare);
      if (bareHit) return bareHit;
      return suffixes.find((s) => bare.endsWith(s.suffix) && bare.length > s.suffix.length)?.adapter;
    },
    forPath(path) {
      for (const { prefix, adapter } of prefixes) {
        if (!path.startsWith(prefix)) continue;
        const rest = path.slice(prefix.length);
        if (rest === '') return { adapter, upstreamPath: '/' };
        if (rest.startsWith('/')) return { adapter, upstreamPath: rest };
        if (rest.startsWith('?')) return { adapter, upstreamPath: '/' + rest };
      }
      return undefined;
    },
  };
}
