import type { Registry } from 'prom-client';
import type { Bus, BusLogger } from '../../core/bus/bus.ts';
import { LmdbOutboxStorage } from '../../core/outbox/lmdb-outbox-storage.ts';
import { Outbox } from '../../core/outbox/outbox.ts';
import type { Store } from '../store/store.ts';

/**
 * The control plane's outbox: in the store's own LMDB environment, so that a publication staged
 * in a store transaction commits or rolls back with the change it announces. Its metrics are
 * `svc_outbox_depth`, `svc_outbox_published_total` and `svc_outbox_dropped_total`.
 */
export function openPublicationOutbox(deps: { store: Store; bus: Bus; registry: Registry; logger: BusLogger }): Outbox {
  return new Outbox({
    bus: deps.bus,
    storage: new LmdbOutboxStorage({ root: deps.store.root }),
    registry: deps.registry,
    metricPrefix: 'svc_outbox',
    logger: deps.logger,
  });
}
