import type { Registry } from 'prom-client';
import type { BusLogger, Messaging } from './bus.ts';
import { NatsBus, type NatsBusOptions } from './nats-bus.ts';
import { connectNats, type NatsConnectionOptions } from './nats-connection.ts';
import { NatsKeyValueStores } from './nats-kv.ts';
import { NatsRequests } from './nats-requests.ts';

export interface NatsMessagingOptions {
  connection: NatsConnectionOptions;
  bus?: NatsBusOptions;
  /** Whether this process may create the stream and buckets (control plane) or only use them (proxy). */
  manage?: boolean;
  /** Where the bus registers its metrics (`svc_bus_poison_messages_total`). */
  registry?: Registry;
}

/** Messaging over one NATS connection: JetStream bus and key-value, core request-reply and signals. */
export async function openNatsMessaging(options: NatsMessagingOptions, logger: BusLogger): Promise<Messaging> {
  const link = await connectNats(options.connection, logger);
  const manage = options.manage ?? true;
  try {
    const bus = await NatsBus.open(link, { manageStream: manage, ...options.bus }, logger, options.registry);
    const requests = new NatsRequests(link.nc, logger);
    return {
      bus,
      keyValue: new NatsKeyValueStores(link, logger, { create: manage }),
      requests,
      signals: requests,
      healthy: () => link.healthy(),
      async close() {
        await bus.close();
        await link.close();
      },
    };
  } catch (error) {
    await link.close();
    throw error;
  }
}
