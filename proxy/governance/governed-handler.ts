import type { ProxiedRequest, ProxyHandler } from '../listener/index.ts';
import { governMcp, type McpServers } from '../mcp/index.ts';
import type { ProviderAdapter, ProviderRegistry } from '../providers/index.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { governLlmCall } from './llm-call/pipeline.ts';
import { sendProviderRefusal } from './provider-refusal.ts';
import { governStoredAnswer } from './stored-answer.ts';
import { governUnclassifiedCall, isPlainRead, passThrough } from './unclassified-call.ts';

/**
 * Headers with which Google's APIs, and many frameworks, take a request for another method than
 * its own: a PUT the proxy passes as unclassified would be served as the POST it routes and meters.
 */
const METHOD_OVERRIDES = ['x-http-method-override', 'x-http-method', 'x-method-override'];

/**
 * The proxy's one request handler: MCP servers go through the MCP path; on a provider host, a
 * metered route goes through the governed LLM path, a free route (token counting) is relayed,
 * a stored answer read back has its tool calls judged, a route around the proxy (an ephemeral
 * key, a realtime session, a batch) is refused, so is a request that would have the answer
 * leave out what the proxy meters (a field mask), and any other path is governed as an
 * unclassified call (metered by estimate or refused, never free; plain reads excepted); one that
 * asks the provider for another method than its own is refused. Every
 * other host passes through unchanged (governance headers stripped).
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
    if (adapter === undefined) return passThrough(deps, req, 'other');
    const override = METHOD_OVERRIDES.find((header) => req.headers[header] !== undefined);
    if (override !== undefined) {
      const message = `${override} is refused: the provider would run another method than the proxy governs; send the request with that method`;
      return sendProviderRefusal(req.clientRes, adapter, 'SVC-ADP-5003', message, req.id, null);
    }
    const route = adapter.route(req.method, req.targetUrl.pathname);
    if (route?.kind === 'free') return passThrough(deps, req, adapter.id, adapter);
    if (route?.kind === 'denied') {
      const message = `${req.method} ${req.targetUrl.pathname} is refused: ${route.reason}`;
      return sendProviderRefusal(req.clientRes, adapter, 'SVC-ADP-5003', message, req.id, null);
    }
    // What an answer holds is what the proxy meters and judges; a plain read generates nothing.
    const hiding =
      route !== null || !isPlainRead(req) ? adapter.hidingParameter?.(req.targetUrl, req.headers) : undefined;
    if (hiding !== undefined) {
      const message = `${hiding}: it would have the provider leave out of the answer, or read or write in a form the proxy does not read, what the proxy meters and judges (its usage, its parts), so the request is refused; send it without`;
      return sendProviderRefusal(req.clientRes, adapter, 'SVC-ADP-5003', message, req.id, null);
    }
    if (route?.kind === 'metered') return governLlmCall(deps, req, adapter, route.op);
    if (route?.kind === 'stored') return governStoredAnswer(deps, req, adapter, route.shape);
    return governUnclassifiedCall(deps, req, adapter);
  };
}
