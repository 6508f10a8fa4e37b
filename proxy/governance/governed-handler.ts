import type { ProxiedRequest, ProxyHandler } from '../listener/index.ts';
import { governMcp, type McpServers } from '../mcp/index.ts';
import type { ProviderAdapter, ProviderRegistry } from '../providers/index.ts';
import { relayResponse } from '../upstream/index.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { governLlmCall } from './llm-call.ts';

/**
 * The proxy's one request handler: provider calls go through the governed LLM path, MCP
 * servers through the MCP path; other paths on a provider host, and every other host, pass
 * through unchanged (governance headers stripped), the provider case metered as zero and counted.
 */
export function createGovernedHandler(
  deps: GovernanceDeps,
  providers: ProviderRegistry,
  mcp: McpServers,
): ProxyHandler {
  const byRoute = new Map(providers.adapters.map((a) => [a.reversePrefix.slice(1), a]));
  const adapterOf = (req: ProxiedRequest): ProviderAdapter | undefined =>
    req.route !== undefined ? byRoute.get(req.route) : providers.forHost(req.targetUrl.host);

  return async (req) => {
    if (mcp.matches(req)) return governMcp(deps, req);
    const adapter = adapterOf(req);
    const op = adapter?.classify(req.method, req.targetUrl.pathname) ?? null;
    if (adapter !== undefined && op !== null) return governLlmCall(deps, req, adapter, op);
    if (adapter !== undefined) deps.metrics.unmetered.inc({ provider: adapter.id });
    const response = await deps.upstream.request({
      url: req.targetUrl,
      method: req.method,
      headers: req.headers,
      body: req.hasBody ? req.body : null,
      signal: req.signal,
      provider: adapter?.id ?? 'other',
      receivedAt: req.receivedAt,
    });
    await relayResponse(req.clientRes, response);
  };
}
