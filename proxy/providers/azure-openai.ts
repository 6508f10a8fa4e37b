import { pathOnly } from './json-access.ts';
import type { AdapterDeps, ProviderAdapter } from './adapter.ts';
import { createOpenAiAdapter } from './openai.ts';

const DEPLOYMENT_PATH = /\/openai\/deployments\/([^/]+)\//;

/** Azure names the deployment, not the model, in the URL; deployments are usually named after the model. */
export function azureDeploymentFromPath(path: string): string | undefined {
  const name = DEPLOYMENT_PATH.exec(pathOnly(path))?.[1];
  return name === undefined ? undefined : decodeURIComponent(name);
}

export interface AzureOpenAiOptions {
  /** Older api-versions reject `stream_options`; enable when every deployment runs 2024-09-01 or later. */
  injectStreamUsage?: boolean;
}

/** Azure OpenAI: the OpenAI wire format under `/openai/deployments/{deployment}/...?api-version=`. */
export function createAzureOpenAiAdapter(deps: AdapterDeps, options: AzureOpenAiOptions = {}): ProviderAdapter {
  return createOpenAiAdapter(deps, {
    id: 'azure-openai',
    hosts: ['*.openai.azure.com', '*.cognitiveservices.azure.com'],
    reversePrefix: '/azure',
    injectStreamUsage: options.injectStreamUsage ?? false,
    modelFromPath: azureDeploymentFromPath,
  });
}
