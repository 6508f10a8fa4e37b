export * from './adapter.ts';
export { createAnthropicAdapter } from './anthropic.ts';
export { createAzureOpenAiAdapter, azureDeploymentFromPath } from './azure-openai.ts';
export { createGeminiAdapter, geminiModelFromPath } from './gemini.ts';
export { createOpenAiAdapter, OPENAI_FLAVOUR, type OpenAiFlavour } from './openai.ts';
export { createOpenAiCompatibleAdapter } from './openai-compatible.ts';
export {
  createAdapterDeps,
  createDefaultAdapters,
  createProviderRegistry,
  FALLBACK_MAX_OUTPUT_TOKENS,
  type AdapterLimits,
  type DefaultAdaptersOptions,
  type ProviderRegistry,
  type ReverseMatch,
} from './registry.ts';
export { DEFAULT_MAX_EVENT_BYTES } from './sse-framer.ts';
export { JSON_LINES_SHAPES, type StoredShape } from './routes.ts';
