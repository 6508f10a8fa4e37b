import type { Registry } from 'prom-client';
import type { Bus, BusLogger } from '../../core/bus/bus.ts';
import { Outbox } from '../../core/outbox/outbox.ts';
import type { Storage } from '../storage/storage.ts';

/**
 * The control plane's outbox: kept by its storage, so that a publication appended in a storage
 * transaction commits or rolls back with the change it announces; every replica drains it.
 * Its metrics are `svc_outbox_depth`, `svc_outbox_published_total` and `svc_outbox_dropped_total`.
 */
export function openPublicationOutbox(deps: {
  storage: Storage;
  bus: Bus;
  registry: Registry;
  logger: BusLogger;
}): Outbox {
  return new Outbox({
    bus: deps.bus,
    storage: deps.storage.outbox,
    registry: deps.registry,
    metricPrefix: 'svc_outbox',
    logger: deps.logger,
  });
}
