import { Counter, Gauge, type Registry } from 'prom-client';

/** Calls held now, and how the holds ended: `svc_proxy_<kind>_held`, `svc_proxy_<kind>_holds_total{outcome}`. */
export interface HoldMetrics {
  held: Gauge;
  holds: Counter<'outcome'>;
}

export function createHoldMetrics(
  registry: Registry,
  kind: 'approval' | 'pause',
  help: { held: string; holds: string },
): HoldMetrics {
  const registers = [registry];
  return {
    held: new Gauge({ name: `svc_proxy_${kind}_held`, help: help.held, registers }),
    holds: new Counter({
      name: `svc_proxy_${kind}_holds_total`,
      help: help.holds,
      labelNames: ['outcome'],
      registers,
    }),
  };
}
