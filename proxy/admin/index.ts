export { AdminServer, type AdminServerOptions, type Readiness } from './admin-server.ts';
export {
  createProxyNetMetrics,
  type ConnectionMode,
  type EgressRefusalReason,
  type ProxyNetMetrics,
  type TunnelDirection,
} from './net-metrics.ts';
