import { Gauge, type Registry } from 'prom-client';

/** `svc_nats_connected`: 1 while the process's NATS connection is up, 0 from a disconnect to the reconnect. */
export function registerNatsConnected(registry: Registry, healthy: () => boolean): void {
  new Gauge({
    name: 'svc_nats_connected',
    help: 'Whether the NATS connection is up (1) or not (0)',
    registers: [registry],
    collect() {
      this.set(healthy() ? 1 : 0);
    },
  });
}
