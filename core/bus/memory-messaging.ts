import type { BusLogger, Messaging } from './bus.ts';
import { MemoryBus, type MemoryBusOptions } from './memory-bus.ts';
import { MemoryKeyValueStores } from './memory-kv.ts';
import { MemoryRequests } from './memory-requests.ts';

/** Standalone mode's messaging: everything in this process, same interfaces as NATS. */
export function createMemoryMessaging(options: MemoryBusOptions & { logger: BusLogger }): Messaging {
  const bus = new MemoryBus(options);
  const requests = new MemoryRequests(options.logger);
  return {
    bus,
    keyValue: new MemoryKeyValueStores(options.logger),
    requests,
    signals: requests,
    healthy: () => bus.healthy(),
    close: () => bus.close(),
  };
}
