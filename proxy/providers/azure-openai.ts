import type { AdapterDeps, ProviderAdapter } from './adapter.ts';
import { createOpenAiAdapter } from './openai.ts';
import { AZURE_OPENAI_ROUTES, azureDeploymentFromPath, azureDeploymentNamedIn, compileRoutes } from './routes.ts';

export { azureDeploymentFromPath };

const AZURE_ROUTES = compileRoutes(AZURE_OPENAI_ROUTES);

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
    routes: AZURE_ROUTES,
    injectStreamUsage: options.injectStreamUsage ?? false,
    modelFromPath: azureDeploymentFromPath,
    modelNamedIn: azureDeploymentNamedIn,
  });
}
