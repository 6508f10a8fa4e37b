import { Gauge, type Registry } from 'prom-client';
import type { SidecarHold } from '../holds/index.ts';

/** The values of `svc_proxy_sidecar_state`, as `svc_proxy_circuit_state` numbers its states. */
const SIDECAR_STATE_VALUE = { running: 0, paused: 1, terminated: 2 } as const;

/**
 * `svc_proxy_sidecar_state`: whether the Immune System paused or terminated the whole sidecar,
 * read at scrape time from `current` (its kept state), so a restart that restored it shows it.
 */
export function createSidecarStateMetric(registry: Registry, current: () => SidecarHold | null): void {
  new Gauge({
    name: 'svc_proxy_sidecar_state',
    help: "The Immune System's hold on the whole sidecar: 0 running, 1 paused (calls held), 2 terminated (envelopes refused)",
    registers: [registry],
    collect() {
      this.set(SIDECAR_STATE_VALUE[current()?.state ?? 'running']);
    },
  });
}
