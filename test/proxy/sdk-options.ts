import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { AzureOpenAI } from 'openai';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch, type Dispatcher } from 'undici';

type OpenAiOptions = NonNullable<ConstructorParameters<typeof OpenAI>[0]>;
type AnthropicOptions = NonNullable<ConstructorParameters<typeof Anthropic>[0]>;

/** An OpenAI SDK client whose fetch goes through `dispatcher` (HTTPS_PROXY semantics). */
export function openAiClient(dispatcher: Dispatcher, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({
    apiKey: 'sk-test-key',
    fetch: fetch as unknown as OpenAiOptions['fetch'],
    fetchOptions: { dispatcher } as unknown as OpenAiOptions['fetchOptions'],
    defaultHeaders: headers,
  });
}

/** The OpenAI SDK's Azure client for one deployment of `myres.openai.azure.com`, through `dispatcher`. */
export function azureClient(
  dispatcher: Dispatcher,
  deployment: string,
  headers: Record<string, string> = {},
): AzureOpenAI {
  return new AzureOpenAI({
    apiKey: 'azure-test-key',
    endpoint: 'https://myres.openai.azure.com',
    apiVersion: '2024-10-21',
    deployment,
    fetch: fetch as unknown as OpenAiOptions['fetch'],
    fetchOptions: { dispatcher } as unknown as OpenAiOptions['fetchOptions'],
    defaultHeaders: headers,
  });
}

export function anthropicClient(dispatcher: Dispatcher, headers: Record<string, string> = {}): Anthropic {
  return new Anthropic({
    apiKey: 'sk-ant-test',
    fetch: fetch as unknown as AnthropicOptions['fetch'],
    fetchOptions: { dispatcher } as unknown as AnthropicOptions['fetchOptions'],
    defaultHeaders: headers,
  });
}
