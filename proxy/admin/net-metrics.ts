import { Counter, Histogram, type Registry } from 'prom-client';

export type ConnectionMode = 'forward' | 'intercept' | 'tunnel' | 'reverse' | 'refused';
export type TunnelDirection = 'client_to_upstream' | 'upstream_to_client';
/** `policy`: a network:connect DENY; `port`: a port no rule opens; `address`: a refused resolved address. */
export type EgressRefusalReason = 'policy' | 'port' | 'address';

/** The network layer's own metrics; every label takes a small fixed set of values. */
export interface ProxyNetMetrics {
  connections: Counter<'mode'>;
  tunnelBytes: Counter<'direction'>;
  egressRefusals: Counter<'reason'>;
  upstreamLatency: Histogram<'provider'>;
  addedLatency: Histogram;
}

export function createProxyNetMetrics(registry: Registry): ProxyNetMetrics {
  return {
    connections: new Counter({
      name: 'svc_proxy_connections_total',
      help: 'Connections and requests accepted by the proxy listener, by how they arrived',
      labelNames: ['mode'],
      registers: [registry],
    }),
    tunnelBytes: new Counter({
      name: 'svc_proxy_tunnel_bytes_total',
      help: 'Bytes relayed through blind CONNECT tunnels',
      labelNames: ['direction'],
      registers: [registry],
    }),
    egressRefusals: new Counter({
      name: 'svc_proxy_egress_refusals_total',
      help: 'Destinations the proxy refused to connect to (answered SVC-ADP-5003), by why',
      labelNames: ['reason'],
      registers: [registry],
    }),
    upstreamLatency: new Histogram({
      name: 'svc_proxy_upstream_latency_seconds',
      help: 'Time from sending a request upstream to receiving its response headers',
      labelNames: ['provider'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    addedLatency: new Histogram({
      name: 'svc_proxy_added_latency_seconds',
      help: 'Time the proxy spends on a request before sending it upstream',
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
      registers: [registry],
    }),
  };
}
