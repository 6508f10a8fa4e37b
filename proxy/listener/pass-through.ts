import { relayResponse, type UpstreamClient } from '../upstream/index.ts';
import type { ProxiedRequest, ProxyHandler } from './proxied-request.ts';

export interface PassThroughOptions {
  /** Metric label for upstream latency; keep it to a small fixed set. */
  providerOf?: (req: ProxiedRequest) => string;
}

/** Forwards the request and streams the answer back unchanged: for traffic that is not governed. */
export function passThroughHandler(upstream: UpstreamClient, options: PassThroughOptions = {}): ProxyHandler {
  const providerOf = options.providerOf ?? ((req: ProxiedRequest) => req.route ?? 'unrouted');
  return async (req) => {
    const response = await upstream.request({
      url: req.targetUrl,
      method: req.method,
      headers: req.headers,
      body: req.hasBody ? req.body : null,
      signal: req.signal,
      provider: providerOf(req),
      receivedAt: req.receivedAt,
    });
    await relayResponse(req.clientRes, response);
  };
}
